/**
 * The session-heads index's records in the LevelDB log (manifests/tlog/session-heads.ts says which nodes exist):
 *
 *   x!<depth:3 hex>!<prefix hex>   node: `i <base64 hash>` (interior) or `l <base64 key> <base64 value>` (leaf)
 *   m!session-heads                present once the index covers every head (written after a rebuild)
 *
 * An append updates the nodes on its session's path in its own batch, so the index always describes exactly the
 * committed heads. A store written before the index existed has no `m!session-heads`: open rebuilds the index
 * from the `h!` records, clearing any half-written one first, and writes the marker last.
 */
import type { Level } from 'level';
import { throwIfAborted } from '../../../store/errors.js';
import { encodeBase64 } from '../../encoding/base64.js';
import { ManifestError } from '../../errors.js';
import {
  buildSessionHeads,
  hashOfNode,
  nodeName,
  type HeadsNode,
  type HeadsNodeReader,
  type NodePath,
  SessionHeadsUpdate,
  extendedHead,
  type Applied,
} from '../../tlog/session-heads.js';
import type { ChainHead } from '../log.js';
import { parseHeadsNodeRecord } from './records.js';
import { writeSyncedBatch } from './tables.js';
import type { Put } from './tree.js';

export const HEADS_BUILT_KEY = 'm!session-heads';
export const headsNodeKey = (path: NodePath) => `x!${nodeName(path)}`;
const ROOT_PATH: NodePath = { depth: 0, prefix: new Uint8Array(32) };

export function headsNodeValue(node: HeadsNode): string {
  return node.leaf ? `l ${encodeBase64(node.key)} ${encodeBase64(node.value)}` : `i ${encodeBase64(node.hash)}`;
}

/** @throws ManifestError `RECORD_CORRUPT` naming a damaged node record */
export async function readHeadsNodes(
  db: Level<string, string>,
  paths: NodePath[],
): Promise<Array<HeadsNode | undefined>> {
  if (paths.length === 0) return [];
  const keys = paths.map(headsNodeKey);
  const raws = await db.getMany(keys);
  return raws.map((raw, i) => (raw === undefined ? undefined : parseHeadsNodeRecord(keys[i]!, raw)));
}

export async function readHeadsRoot(db: Level<string, string>): Promise<Uint8Array> {
  return hashOfNode((await readHeadsNodes(db, [ROOT_PATH]))[0]);
}

/**
 * The committed nodes of the index as this log last read or wrote them: the LevelDB log is its store's only writer
 * while open, so a node it has seen stays what it saw until its own next batch, which `commit`s its changes here.
 * Absent nodes are remembered too (a walk reads a few depths past where its path ends). Bounded: the oldest-used
 * nodes are dropped past `limit` (the few near the root are used by every walk and stay).
 */
export class HeadsNodeCache {
  private readonly nodes = new Map<string, HeadsNode | null>();

  constructor(
    private readonly db: Level<string, string>,
    private readonly limit = 1 << 16,
  ) {}

  /** The nodes at `paths`: at once when all are cached, else after reading the others from the database. */
  readonly read: HeadsNodeReader = (paths) => {
    const out: Array<HeadsNode | undefined> = new Array(paths.length);
    const missing: number[] = [];
    const keys = paths.map(headsNodeKey);
    for (let i = 0; i < keys.length; i++) {
      const hit = this.nodes.get(keys[i]!);
      if (hit === undefined) missing.push(i);
      else {
        this.remember(keys[i]!, hit); // used again: moved to the young end
        out[i] = hit ?? undefined;
      }
    }
    if (missing.length === 0) return out;
    return readHeadsNodes(
      this.db,
      missing.map((i) => paths[i]!),
    ).then((got) => {
      missing.forEach((i, j) => {
        out[i] = got[j];
        this.remember(keys[i]!, got[j] ?? null);
      });
      return out;
    });
  };

  /** The node cached at `path` (null: cached as absent), undefined when not cached; its place in the order kept. */
  peek(path: NodePath): HeadsNode | null | undefined {
    return this.nodes.get(headsNodeKey(path));
  }

  /** The nodes a batch wrote and the records it removed, once it is durable. */
  commit(changes: Array<{ path: NodePath; node: HeadsNode }>, removed: NodePath[] = []): void {
    for (const c of changes) this.remember(headsNodeKey(c.path), c.node);
    for (const path of removed) this.remember(headsNodeKey(path), null);
  }

  private remember(key: string, node: HeadsNode | null): void {
    this.nodes.delete(key);
    this.nodes.set(key, node);
    if (this.nodes.size > this.limit) this.nodes.delete(this.nodes.keys().next().value!);
  }
}

/** What one append batch writes to the index: its puts, the nodes they hold (for a cache, once durable), the new root. */
export interface HeadsPuts extends Applied {
  puts: Array<Put | { type: 'del'; key: string }>;
}

/**
 * The puts that record the heads of one append batch (distinct sessions). Synchronous when `read` answers from its
 * cache (the usual case: the batch is built between two synced writes without waiting for other work), else a
 * promise. A head's `prev` (its append's link): the index must commit the head that append extended (`extendedHead`),
 * else `ROLLBACK` (SessionHeadsUpdate.set's `previous`); absent, not checked.
 */
export function headsPuts(
  read: HeadsNodeReader,
  heads: Array<ChainHead & { prev?: string | null }>,
): HeadsPuts | Promise<HeadsPuts> {
  const applied = new SessionHeadsUpdate(read).apply(
    heads.map((h) => ({
      session: h.session,
      head: { seq: h.seq, id: h.id },
      previous: h.prev === undefined ? undefined : extendedHead({ seq: h.seq, prev: h.prev }),
    })),
  );
  const toPuts = ({ changes, removed, root }: Applied): HeadsPuts => ({
    puts: [
      ...changes.map((c) => ({ type: 'put' as const, key: headsNodeKey(c.path), value: headsNodeValue(c.node) })),
      ...removed.map((path) => ({ type: 'del' as const, key: headsNodeKey(path) })),
    ],
    changes,
    removed,
    root,
  });
  return applied instanceof Promise ? applied.then(toPuts) : toPuts(applied);
}

/**
 * Builds the index from every stored head (a store from before the index); the marker is written last.
 * @param signal looked at before each head is read and before each batch of nodes is written: once it aborts,
 *   `CANCELLED` (the signal's reason as the cause) with no marker written, so the next open builds the index again
 *   from the start (the nodes written before it are cleared first)
 */
export async function rebuildSessionHeads(
  db: Level<string, string>,
  heads: AsyncIterable<ChainHead>,
  signal?: AbortSignal,
): Promise<Uint8Array> {
  throwIfAborted(signal, ManifestError);
  await db.clear({ gte: 'x!', lt: 'x!\xff' });
  const all: Array<{ session: string; head: { seq: number; id: string } }> = [];
  for await (const h of heads) {
    throwIfAborted(signal, ManifestError);
    all.push({ session: h.session, head: { seq: h.seq, id: h.id } });
  }
  const { root, nodes } = buildSessionHeads(all);
  for (let i = 0; i < nodes.length; i += 10_000) {
    throwIfAborted(signal, ManifestError);
    const puts: Put[] = nodes
      .slice(i, i + 10_000)
      .map((n) => ({ type: 'put', key: headsNodeKey(n.path), value: headsNodeValue(n.node) }));
    await writeSyncedBatch(db, puts);
  }
  await db.put(HEADS_BUILT_KEY, '1', { sync: true });
  return root;
}
