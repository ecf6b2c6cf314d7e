import type { CommandOwner } from './commands.config';

const byOwner = new Map<CommandOwner, Set<string>>();

/**
 * Declares the command patterns a service owns, once, where the scope defines them (its api lib), e.g.
 * `defineCommands('subscriptions', { create: 'subscriptions.subscription-checkout.create' })`. Patterns are
 * `<owner>.<aggregate>.<command>`; the Kafka transport must know them before it connects (one reply topic each).
 */
export function defineCommands<const T extends Record<string, string>>(owner: CommandOwner, patterns: T): T {
  const set = byOwner.get(owner) ?? new Set<string>();
  for (const pattern of Object.values(patterns)) {
    if (!pattern.startsWith(`${owner}.`))
      throw new Error(`command pattern '${pattern}' must start with its owner '${owner}.'`);
    set.add(pattern);
  }
  byOwner.set(owner, set);
  return patterns;
}

export function commandPatternsOf(owner: CommandOwner): readonly string[] {
  return [...(byOwner.get(owner) ?? [])].sort();
}
