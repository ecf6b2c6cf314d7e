/**
 * A small read-through cache for rows a projection in this process keeps up to date: entries live at most
 * `ttlMs` (which bounds staleness when another process changed the row) and are dropped at once by
 * `invalidate(group)` when this process's projection changes them. A load that overlapped an invalidation of
 * its group is returned but not stored, so a row read just before a change cannot outlive it. Misses (undefined)
 * are never stored: the row may appear any moment.
 */
export class InvalidatedCache<Value> {
  private readonly entries = new Map<
    string,
    { readonly value: Value; readonly until: number; readonly group: string }
  >();
  /** Counts invalidations; each group remembers the count at its last one. */
  private invalidations = 0;
  private readonly invalidatedAt = new Map<string, number>();

  constructor(
    private readonly options: {
      readonly ttlMs: number;
      readonly maxEntries: number;
      readonly now?: () => number;
    },
  ) {}

  async get(
    key: string,
    load: () => Promise<{ value: Value; group: string } | undefined>,
  ): Promise<Value | undefined> {
    const now = this.options.now?.() ?? Date.now();
    const hit = this.entries.get(key);
    if (hit && hit.until > now) return hit.value;
    const before = this.invalidations;
    const loaded = await load();
    if (!loaded) {
      this.entries.delete(key);
      return undefined;
    }
    if ((this.invalidatedAt.get(loaded.group) ?? 0) <= before) {
      if (this.entries.size >= this.options.maxEntries) {
        const oldest = this.entries.keys().next();
        if (!oldest.done) this.entries.delete(oldest.value);
      }
      this.entries.set(key, { value: loaded.value, until: now + this.options.ttlMs, group: loaded.group });
    }
    return loaded.value;
  }

  /** Drops every entry of `group` (e.g. a merchant) and keeps loads in flight from storing stale values. */
  invalidate(group: string): void {
    this.invalidatedAt.set(group, ++this.invalidations);
    for (const [key, entry] of this.entries) if (entry.group === group) this.entries.delete(key);
  }
}
