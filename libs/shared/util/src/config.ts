/**
 * Typed environment reading that fails fast and names the variable, so a misconfigured service
 * refuses to start with a clear message instead of failing later.
 */
export class ConfigError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'ConfigError';
  }
}

type Env = Record<string, string | undefined>;

export function envString(env: Env, name: string, fallback?: string): string {
  const value = env[name];
  if (value === undefined || value === '') {
    if (fallback !== undefined) return fallback;
    throw new ConfigError(`environment variable ${name} is required`);
  }
  return value;
}

export function envOptional(env: Env, name: string): string | undefined {
  const value = env[name];
  return value === undefined || value === '' ? undefined : value;
}

export function envInt(
  env: Env,
  name: string,
  fallback?: number,
  min = 0,
  max = Number.MAX_SAFE_INTEGER,
): number {
  const raw = env[name];
  if (raw === undefined || raw === '') {
    if (fallback !== undefined) return fallback;
    throw new ConfigError(`environment variable ${name} is required`);
  }
  if (!/^-?[0-9]+$/.test(raw))
    throw new ConfigError(`environment variable ${name} must be an integer, got '${raw}'`);
  const n = Number(raw);
  if (n < min || n > max)
    throw new ConfigError(`environment variable ${name} must be between ${min} and ${max}, got ${n}`);
  return n;
}

export function envBool(env: Env, name: string, fallback = false): boolean {
  const raw = env[name];
  if (raw === undefined || raw === '') return fallback;
  if (raw === 'true' || raw === '1') return true;
  if (raw === 'false' || raw === '0') return false;
  throw new ConfigError(`environment variable ${name} must be true or false, got '${raw}'`);
}

export function envEnum<T extends string>(env: Env, name: string, allowed: readonly T[], fallback?: T): T {
  const raw = env[name];
  if (raw === undefined || raw === '') {
    if (fallback !== undefined) return fallback;
    throw new ConfigError(`environment variable ${name} is required (one of ${allowed.join(', ')})`);
  }
  if (!(allowed as readonly string[]).includes(raw)) {
    throw new ConfigError(`environment variable ${name} must be one of ${allowed.join(', ')}, got '${raw}'`);
  }
  return raw as T;
}
