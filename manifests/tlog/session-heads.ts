/**
 * The session-heads index: a sparse Merkle tree over every session's head, whose root each checkpoint
 * commits in an extension line, so that a filtered export can prove that a chain ends exactly at the head the
 * log had at the checkpoint (or that a session did not exist). Isomorphic.
 *
 * Keys are 256 bits: SHA-256 of the session id's UTF-8 bytes (SHA-256 as in the RFC 6962 tree). A key's
 * value is the SHA-256 of the canonical bytes of `{ "id": <head manifest id>, "seq": <head seq> }`.
 * Hashes, domain-separated from RFC 6962's 0x00/0x01:
 *
 *   empty subtree      Z = SHA-256(0x12)
 *   subtree of 1 key   SHA-256(0x10 ‖ key ‖ value)            (a leaf sits as high as it is alone)
 *   subtree of ≥ 2     SHA-256(0x11 ‖ left ‖ right)
 *
 * So the root is a function of the set of (key, value) pairs alone, every backend and this file compute the
 * same root for the same heads, and a path is about log2(sessions) nodes long, not 256. Nodes are named by
 * their position: depth d (0 = root) and the key's first d bits (`NodePath`). Backends store only nodes that
 * exist (leaves and interior nodes), never empty ones.
 */
import { sha256 } from '../crypto/sha256.js';
import { decodeBase64, encodeBase64 } from '../encoding/base64.js';
import { domainHash, equalBytes, type ProofResult } from './merkle.js';
import { ManifestError, rollbackRefused } from '../errors.js';
import { isUint8Array, shownValue } from '../../store/errors.js';

export const KEY_BITS = 256;
const LEAF = 0x10;
const INNER = 0x11;

/** The hash of an empty subtree (at every depth), and so the root of a log without sessions. */
export const EMPTY_HEADS_ROOT: Uint8Array = sha256(Uint8Array.of(0x12));

/** The checkpoint extension line's keyword: `handoff-ledger/session-heads <base64 root>`. */
export const SESSION_HEADS_EXTENSION = 'handoff-ledger/session-heads';

/** A chain's head as the index knows it. */
export interface SessionHead {
  seq: number;
  id: string;
}

/** A stored node: a leaf (one key alone in its subtree) or an interior node (two or more keys below). */
export type HeadsNode = { leaf: true; key: Uint8Array; value: Uint8Array } | { leaf: false; hash: Uint8Array };

/** Where a node sits: its depth and the first `depth` bits of every key below it (the rest zero). */
export interface NodePath {
  depth: number;
  prefix: Uint8Array;
}

/** Reads stored nodes (undefined where none is stored: an empty subtree). */
export type HeadsNodeReader = (
  paths: NodePath[],
) => Array<HeadsNode | undefined> | Promise<Array<HeadsNode | undefined>>;

/**
 * Work that reads stored nodes, written as a generator: it yields the paths it needs and is resumed with their nodes.
 * `runReads` answers it synchronously for as long as the reader does (a cache that holds them), so an update whose
 * nodes are all cached does not wait for the event loop's other work between its reads.
 */
type Reads<T> = Generator<NodePath[], T, Array<HeadsNode | undefined>>;

/** Runs `steps` with `read`: the result at once while every read is answered at once, else a promise of it. */
function runReads<T>(steps: Reads<T>, read: HeadsNodeReader): T | Promise<T> {
  let next = steps.next();
  while (!next.done) {
    const got = read(next.value);
    if (!Array.isArray(got)) return finishReads(steps, Promise.resolve(got), read);
    next = steps.next(got);
  }
  return next.value;
}

async function finishReads<T>(
  steps: Reads<T>,
  pending: Promise<Array<HeadsNode | undefined>>,
  read: HeadsNodeReader,
): Promise<T> {
  let next = steps.next(await pending);
  while (!next.done) next = steps.next(await read(next.value));
  return next.value;
}

/**
 * A (non-)membership proof: the hashes beside the path from the root down to depth `depth`, where the key's
 * own leaf sits (member), or an empty subtree or another key's leaf (`other`) sits (non-member). `bitmap`
 * (base64, ⌈depth/8⌉ bytes, bit i = MSB-first bit i) marks which siblings are non-empty; only those are listed,
 * root side first.
 */
export interface SessionHeadProof {
  depth: number;
  bitmap: string;
  siblings: string[];
  other?: { key: string; value: string } | undefined;
}

const encoder = new TextEncoder();

export const sessionKey = (session: string): Uint8Array => sha256(encoder.encode(session));

/**
 * `sessionKey` remembered for the sessions an update places (every append hashes its session's id again otherwise):
 * the same bytes, shared by this file's updates alone, which never change a key. Bounded: the oldest entry goes.
 */
const placedKeys = new Map<string, Uint8Array>();
const PLACED_KEYS_KEPT = 4096;
function placedKey(session: string): Uint8Array {
  let key = placedKeys.get(session);
  if (key === undefined) {
    key = sessionKey(session);
    if (placedKeys.size >= PLACED_KEYS_KEPT) placedKeys.delete(placedKeys.keys().next().value!);
    placedKeys.set(session, key);
  }
  return key;
}

/**
 * The head an append of `seq` with link `prev` extends, as `SessionHeadsUpdate.set`'s `previous`: none (null) for a
 * chain's first entry, else seq − 1 with the id `prev` names (the append was checked to extend the head so).
 */
export const extendedHead = (change: { seq: number; prev: string | null }): SessionHead | null =>
  change.prev === null ? null : { seq: change.seq - 1, id: change.prev };

/** The value hashed into the leaf: SHA-256 of the RFC 8785 bytes of `{ id, seq }` (keys in code-point order). */
export function headValue(head: SessionHead): Uint8Array {
  return sha256(encoder.encode(`{"id":${JSON.stringify(head.id)},"seq":${head.seq}}`));
}

export function leafNodeHash(key: Uint8Array, value: Uint8Array): Uint8Array {
  return domainHash(LEAF, key, value);
}

export function innerNodeHash(left: Uint8Array, right: Uint8Array): Uint8Array {
  return domainHash(INNER, left, right);
}

export const bitAt = (key: Uint8Array, i: number): number => (key[i >> 3]! >> (7 - (i & 7))) & 1;

/** The first `depth` bits of `key`, the rest zero (optionally with bit `depth - 1` flipped: the sibling). */
export function prefixOf(key: Uint8Array, depth: number, flipLast = false): Uint8Array {
  const out = new Uint8Array(32);
  const full = depth >> 3;
  for (let i = 0; i < full; i++) out[i] = key[i]!;
  if (depth & 7) out[full] = key[full]! & (0xff << (8 - (depth & 7)));
  if (flipLast && depth > 0) out[(depth - 1) >> 3]! ^= 0x80 >> ((depth - 1) & 7);
  return out;
}

/** A stable text name for a node position (LevelDB keys, maps): 3 hex digits of depth, then the prefix's bytes. */
export function nodeName(path: NodePath): string {
  const bytes = (path.depth + 7) >> 3;
  let name = DEPTH_NAMES[path.depth]!;
  for (let i = 0; i < bytes; i++) name += HEX_BYTES[path.prefix[i]!]!;
  return name;
}

/** `nodeName`'s parts, made once: every walk and batch names a few nodes per session (an append's hot path). */
const HEX_BYTES = Array.from({ length: 256 }, (_, b) => b.toString(16).padStart(2, '0'));
const DEPTH_NAMES = Array.from({ length: KEY_BITS + 1 }, (_, d) => `${d.toString(16).padStart(3, '0')}!`);

/** The hash a leaf contributes, remembered per node object (a node read or cached once is reused as it is). */
const leafHashes = new WeakMap<HeadsNode, Uint8Array>();

/**
 * The children's hashes an interior node was hashed from by `settle`, per node object, as the very arrays
 * `hashOfNode` gave (nodes and their hashes are never changed once made). A later update that finds this node above
 * children whose `hashOfNode` is the same arrays (a log's cache of its own writes) knows the node hashes them
 * without hashing again; any other child (read from storage, or changed) is hashed and compared. Hashes, not the
 * child nodes: a node must not keep its subtree in memory past a bounded cache.
 */
const hashedFrom = new WeakMap<HeadsNode, readonly [Uint8Array, Uint8Array]>();

export function hashOfNode(n: HeadsNode | undefined): Uint8Array {
  if (n === undefined) return EMPTY_HEADS_ROOT;
  if (!n.leaf) return n.hash;
  let h = leafHashes.get(n);
  if (!h) leafHashes.set(n, (h = leafNodeHash(n.key, n.value)));
  return h;
}

function commonPrefixBits(a: Uint8Array, b: Uint8Array): number {
  for (let i = 0; i < 32; i++) {
    const x = a[i]! ^ b[i]!;
    if (x !== 0) return i * 8 + Math.clz32(x) - 24;
  }
  return KEY_BITS;
}

const compareKeys = (a: Uint8Array, b: Uint8Array): number => {
  for (let i = 0; i < 32; i++) if (a[i] !== b[i]) return a[i]! - b[i]!;
  return 0;
};

/** Depths read per round trip while walking down a path: ~log2(sessions) deep, so one round for 10⁹ sessions. */
const WALK_CHUNK = 32;
/** Extra depths the first round asks for beyond the last path's end (paths of one index differ by a few). */
const WALK_SLACK = 4;

/**
 * How many depths the first round of the next walk reads: a few more than where the last walk in this process
 * ended, so a small index is not read 32 mostly absent nodes at a time. A hint only (shared by every index in the
 * process): a walk reads on, 32 depths a round, until its path ends.
 */
let firstRound = WALK_CHUNK;

/**
 * The nodes an update of `session`'s head usually reads when its walks' first round is `depths` deep
 * (`SessionHeadsUpdate`'s `firstRound`): the path's nodes down to depth `depths - 1`, and beside each the other child of
 * the node above (the siblings `settle` hashes the path with). For a store that reads them with its other reads of the
 * same moment (PostgreSQL's append, in the statement that reads its gates); the update reads anything else it needs.
 */
export function likelyPaths(session: string, depths: number): NodePath[] {
  const key = placedKey(session);
  const paths: NodePath[] = [];
  for (let d = 0; d < Math.min(depths, KEY_BITS + 1); d++) {
    paths.push({ depth: d, prefix: prefixOf(key, d) });
    if (d > 0) paths.push({ depth: d, prefix: prefixOf(key, d, true) });
  }
  return paths;
}

/**
 * Walks from the root along `key` to where the path ends: the first depth holding a leaf or nothing.
 * Returns that depth and the node there, reading through `read`; the first round reads `first` depths (default: the
 * process's hint, `firstRound`).
 */
function* walk(
  key: Uint8Array,
  read: (paths: NodePath[]) => Reads<Array<HeadsNode | undefined>>,
  first = firstRound,
): Reads<{ depth: number; node: HeadsNode | undefined }> {
  for (let start = 0, round = first; start <= KEY_BITS; start += round, round = WALK_CHUNK) {
    const paths: NodePath[] = [];
    for (let d = start; d < Math.min(start + round, KEY_BITS + 1); d++)
      paths.push({ depth: d, prefix: prefixOf(key, d) });
    const nodes = yield* read(paths);
    for (let i = 0; i < nodes.length; i++) {
      const n = nodes[i];
      if (n === undefined || n.leaf) {
        firstRound = Math.min(WALK_CHUNK, start + i + 1 + WALK_SLACK);
        return { depth: start + i, node: n };
      }
    }
  }
  // Only stored records can put interior nodes along a whole key: damage, which fsck reports.
  throw new ManifestError('RECORD_CORRUPT', 'session-heads index: an interior node at depth 256 (a damaged index)');
}

/** A read answered by the reader itself. */
function* direct(paths: NodePath[]): Reads<Array<HeadsNode | undefined>> {
  return yield paths;
}

/** An interior node on a changed path whose hash is computed once all of a batch's heads are placed. */
const PENDING: HeadsNode = { leaf: false, hash: new Uint8Array(0) };

/**
 * Applies head changes to a stored index, reading through an overlay of its own writes: `set` each changed head,
 * then take `changes()` (the nodes to store, in any order, in the same atomic write as the entries) and `root()`;
 * or all of it in one `apply`.
 * Each `set` walks its path (one read, usually) and places its leaf; the interior nodes on the changed paths are
 * hashed once, deepest first, when the changes are taken: a batch of heads shares the hashing near the root, and
 * their siblings are read in one round.
 */
export class SessionHeadsUpdate {
  private readonly overlay = new Map<string, { path: NodePath; node: HeadsNode }>();
  /**
   * Positions this update knows to be empty: beside the interior nodes a split makes, where a leaf stood alone.
   * Taken as empty whatever is stored there: a stored record (damage) must not reach a signed root; it is read with
   * the other siblings and, when present, removed in the same write (`removed`).
   */
  private readonly empty = new Map<string, NodePath>();
  private readonly strays = new Map<string, NodePath>();
  /** Interior nodes whose hash is pending, by name. */
  private readonly dirty = new Map<string, NodePath>();
  /**
   * Every node as first read from the stored index (undefined: none stored), by name: what a changed interior node
   * held before this update, and its children then, so that `settle` can hold each to its children before replacing
   * it (a node rewritten under the index without its ancestors must not be folded into a signed root).
   */
  private readonly original = new Map<string, HeadsNode | undefined>();

  /**
   * @param stored the stored index
   * @param firstRound how many depths each walk's first round reads (default: a few past where the last walk of this
   *   process ended); a store that read ahead (`likelyPaths`) passes the depths it read
   */
  constructor(
    private readonly stored: HeadsNodeReader,
    private readonly firstRound?: number,
  ) {}

  /** The deepest depth a walk of this update ended at (-1 before any): where the index's paths end, for a read ahead. */
  walkedTo = -1;

  /** Reads through the overlay: only the paths it does not hold go to the stored index. */
  private *read(paths: NodePath[]): Reads<Array<HeadsNode | undefined>> {
    const out: Array<HeadsNode | undefined> = new Array(paths.length);
    const missing: number[] = [];
    const names = paths.map(nodeName);
    names.forEach((name, i) => {
      const hit = this.overlay.get(name);
      if (hit) out[i] = hit.node;
      else if (!this.empty.has(name)) missing.push(i); // else empty by this update's split, whatever is stored
    });
    if (missing.length > 0) {
      const got = yield missing.map((i) => paths[i]!);
      missing.forEach((i, j) => {
        out[i] = got[j];
        if (!this.original.has(names[i]!)) this.original.set(names[i]!, got[j]);
      });
    }
    return out;
  }

  private put(path: NodePath, node: HeadsNode): void {
    this.overlay.set(nodeName(path), { path, node });
  }

  /**
   * The first session whose stored leaf did not commit the head its change extends (`set`'s `previous`), with how:
   * refused `ROLLBACK` once the path's stored nodes were held to each other (`settle`), so a damaged path keeps its
   * `TREE_DAMAGED`.
   */
  private unextended: { session: string; problem: string } | undefined;

  /**
   * Records `session`'s new head (a new session, or its chain grown). `previous`: the head the change extends (null:
   * none, a new chain), which the stored index must commit for the session (its leaf, or none), else the update is
   * refused `ROLLBACK` (a head record set back or removed under the index, with its tail and watermark, must not be
   * folded into the next signed root); undefined: not checked.
   */
  async set(session: string, head: SessionHead, previous?: SessionHead | null): Promise<void> {
    return runReads(this.setSteps(session, head, previous), this.stored);
  }

  private *setSteps(session: string, head: SessionHead, previous?: SessionHead | null): Reads<void> {
    const key = placedKey(session);
    const value = headValue(head);
    const end = yield* walk(key, (paths) => this.read(paths), this.firstRound);
    this.walkedTo = Math.max(this.walkedTo, end.depth);
    if (previous !== undefined && this.unextended === undefined) {
      // The node where the path ends as stored (a batch's sessions are distinct: no change of this update replaced it).
      const problem = leafProblem(end.node, key, previous ?? undefined);
      if (problem !== undefined) this.unextended = { session, problem };
    }
    let deepest = end.depth - 1; // the deepest interior node on the path after this change
    if (end.node?.leaf && !equalBytes(end.node.key, key)) {
      // Another key sits alone where the path ends: both go one level below where their keys part.
      const other = end.node;
      const split = commonPrefixBits(key, other.key);
      // The interior nodes from where the leaf stood down to where the keys part have one child on the path each.
      for (let d = end.depth; d < split; d++) {
        const path = { depth: d + 1, prefix: prefixOf(key, d + 1, true) };
        this.empty.set(nodeName(path), path);
      }
      this.put({ depth: split + 1, prefix: prefixOf(other.key, split + 1) }, other);
      deepest = split;
      this.put({ depth: split + 1, prefix: prefixOf(key, split + 1) }, { leaf: true, key, value });
    } else this.put({ depth: end.depth, prefix: prefixOf(key, end.depth) }, { leaf: true, key, value });
    for (let d = deepest; d >= 0; d--) {
      const path = { depth: d, prefix: prefixOf(key, d) };
      const name = nodeName(path);
      if (this.dirty.has(name)) break; // this node and every one above it are pending already
      this.dirty.set(name, path);
      this.overlay.set(name, { path, node: PENDING });
    }
  }

  /** Hashes the pending interior nodes, deepest first; their children not in the overlay are read in one round. */
  private *settle(): Reads<void> {
    if (this.dirty.size === 0) {
      // No interior node on the changed paths (the root a leaf, or none): nothing stored to hold the leaf to.
      if (this.unextended !== undefined) throw rollbackRefused(this.unextended.session, this.unextended.problem);
      return;
    }
    const pending = [...this.dirty].sort((a, b) => b[1].depth - a[1].depth); // [name, path], deepest first
    this.dirty.clear();
    // Each pending node's two children, named once (a batch names every changed node's children several times).
    const children = pending.flatMap(([, p]) => {
      const left = { depth: p.depth + 1, prefix: prefixOf(p.prefix, p.depth + 1) };
      const right = { depth: p.depth + 1, prefix: prefixOf(p.prefix, p.depth + 1, true) };
      return [
        { path: left, name: nodeName(left) },
        { path: right, name: nodeName(right) },
      ];
    });
    const outside = children.filter((c) => !this.overlay.has(c.name));
    // The stored children of a changed node that stood as an interior node, where no read of this update saw them
    // (usually none: the walks read every node on their paths).
    const unseen = pending.flatMap(([name], i) => {
      const before = this.original.get(name);
      if (before === undefined || before.leaf) return [];
      return [children[2 * i]!, children[2 * i + 1]!].filter(
        (c) => this.overlay.has(c.name) && !this.original.has(c.name) && !this.empty.has(c.name),
      );
    });
    const asked = [...outside, ...unseen];
    const got = asked.length > 0 ? yield asked.map((c) => c.path) : [];
    const storedChildren = new Map<string, HeadsNode | undefined>();
    outside.forEach((c, i) => {
      const empty = this.empty.get(c.name);
      if (empty && got[i] !== undefined) this.strays.set(c.name, empty);
      storedChildren.set(c.name, empty ? undefined : got[i]);
      if (!empty && !this.original.has(c.name)) this.original.set(c.name, got[i]);
    });
    unseen.forEach((c, j) => this.original.set(c.name, got[outside.length + j]));
    // Each changed node that stood as an interior node must have hashed its stored children: else a node below it was
    // rewritten without it (a tail cut from a session's leaf, say), and the new root would commit to the rewrite.
    const was = (c: { name: string }) => hashOfNode(this.empty.has(c.name) ? undefined : this.original.get(c.name));
    pending.forEach(([name, p], i) => {
      const before = this.original.get(name);
      if (before === undefined || before.leaf) return;
      const left = was(children[2 * i]!);
      const right = was(children[2 * i + 1]!);
      const from = hashedFrom.get(before);
      if (from !== undefined && from[0] === left && from[1] === right) return; // hashed from these very arrays
      if (!equalBytes(innerNodeHash(left, right), before.hash))
        throw new ManifestError('TREE_DAMAGED', unhashedNodeProblem(p.depth));
    });
    // The stored path is whole (each changed node hashes its stored children): a leaf that does not commit the head a
    // change extends is the head record's own change, not the index's.
    if (this.unextended !== undefined) throw rollbackRefused(this.unextended.session, this.unextended.problem);
    const child = (c: { name: string }): Uint8Array => {
      const mine = this.overlay.get(c.name);
      return hashOfNode(mine ? mine.node : storedChildren.get(c.name));
    };
    pending.forEach(([name, path], i) => {
      const left = child(children[2 * i]!);
      const right = child(children[2 * i + 1]!);
      const node: HeadsNode = { leaf: false, hash: innerNodeHash(left, right) };
      hashedFrom.set(node, [left, right]);
      this.overlay.set(name, { path, node });
    });
  }

  private *rootSteps(): Reads<Uint8Array> {
    yield* this.settle();
    return hashOfNode((yield* this.read([{ depth: 0, prefix: new Uint8Array(32) }]))[0]);
  }

  /** The nodes written (each position once, its latest node). */
  async changes(): Promise<Array<{ path: NodePath; node: HeadsNode }>> {
    await runReads(this.settle(), this.stored);
    return [...this.overlay.values()];
  }

  /** The records to remove once `changes` were taken: any stored where the index is empty (damage), usually none. */
  removed(): NodePath[] {
    return [...this.strays].filter(([name]) => !this.overlay.has(name)).map(([, path]) => path);
  }

  async root(): Promise<Uint8Array> {
    return runReads(this.rootSteps(), this.stored);
  }

  /**
   * `set` for each of `heads`, then `changes()` and `root()`: the result at once where the stored reader answers at
   * once (every node cached), else a promise of it. An append batch is built without yielding to the event loop.
   */
  apply(
    heads: Iterable<{ session: string; head: SessionHead; previous?: SessionHead | null | undefined }>,
  ): Applied | Promise<Applied> {
    return runReads(this.applySteps(heads), this.stored);
  }

  private *applySteps(
    heads: Iterable<{ session: string; head: SessionHead; previous?: SessionHead | null | undefined }>,
  ): Reads<Applied> {
    for (const { session, head, previous } of heads) yield* this.setSteps(session, head, previous);
    const root = yield* this.rootSteps();
    return { changes: [...this.overlay.values()], removed: this.removed(), root };
  }
}

/**
 * An update's refusal of a stored interior node at `depth` that does not hash its stored children (`settle`, deepest
 * first): the message of the `TREE_DAMAGED` an append's index update throws, and so `IndexedHeadProblem.appendProblem`.
 */
function unhashedNodeProblem(depth: number): string {
  return `session-heads index: the stored node at depth ${depth} does not hash its children (a node below it was changed without it: a damaged or rewritten index; fsck reports it)`;
}

/** What an update wrote: each changed position once, with its latest node, and the new root. */
export interface Applied {
  changes: Array<{ path: NodePath; node: HeadsNode }>;
  /** Stored records where the index is empty (damage a split came by): removed in the same write. */
  removed: NodePath[];
  root: Uint8Array;
}

/** Every node of the index of `heads` (a rebuild), and its root. Memory: the heads, sorted. */
export function buildSessionHeads(heads: Iterable<{ session: string; head: SessionHead }>): {
  root: Uint8Array;
  nodes: Array<{ path: NodePath; node: HeadsNode }>;
} {
  const leaves = [...heads].map((h) => ({ key: sessionKey(h.session), value: headValue(h.head) }));
  leaves.sort((a, b) => compareKeys(a.key, b.key));
  const nodes: Array<{ path: NodePath; node: HeadsNode }> = [];
  const build = (lo: number, hi: number, depth: number): Uint8Array => {
    if (hi === lo) return EMPTY_HEADS_ROOT;
    const first = leaves[lo]!;
    if (hi - lo === 1) {
      nodes.push({ path: { depth, prefix: prefixOf(first.key, depth) }, node: { leaf: true, ...first } });
      return leafNodeHash(first.key, first.value);
    }
    if (depth >= KEY_BITS) throw new Error('session-heads index: two sessions with one key');
    let mid = lo;
    while (mid < hi && bitAt(leaves[mid]!.key, depth) === 0) mid++;
    const hash = innerNodeHash(build(lo, mid, depth + 1), build(mid, hi, depth + 1));
    nodes.push({ path: { depth, prefix: prefixOf(first.key, depth) }, node: { leaf: false, hash } });
    return hash;
  };
  const root = build(0, leaves.length, 0);
  return { root, nodes };
}

/**
 * The root alone (an auditor recomputing a full bundle's index, fsck).
 * @throws ManifestError `INVALID_ARGUMENT` for heads that are no iterable of `{ session: string, head: { seq, id } }`
 *   (a seq that is no non-negative integer, an id that is no string): each was a TypeError, or hashed as it was
 *   (`{"id":undefined,"seq":undefined}` for a head that was a number), a root of heads that were none
 */
export function sessionHeadsRoot(heads: Iterable<{ session: string; head: SessionHead }>): Uint8Array {
  const given = heads as unknown as { [Symbol.iterator]?: unknown } | null | undefined;
  if (typeof given !== 'object' || given === null || typeof given[Symbol.iterator] !== 'function')
    throw new ManifestError(
      'INVALID_ARGUMENT',
      `sessionHeadsRoot: heads must be an iterable, not ${shownValue(heads)}`,
    );
  const list = [...heads];
  list.forEach((h, i) => {
    const entry = h as { session?: unknown; head?: { seq?: unknown; id?: unknown } | null } | null | undefined;
    const head = typeof entry === 'object' && entry !== null ? entry.head : undefined;
    if (
      typeof entry?.session !== 'string' ||
      typeof head !== 'object' ||
      head === null ||
      typeof head.id !== 'string' ||
      !Number.isSafeInteger(head.seq) ||
      (head.seq as number) < 0
    )
      throw new ManifestError(
        'INVALID_ARGUMENT',
        `sessionHeadsRoot: heads[${i}] must be { session: string, head: { seq: whole number from 0, id: string } }`,
      );
  });
  return buildSessionHeads(list).root;
}

/**
 * The proof for `session` from a stored index, with the head hash found where its path ends (the caller
 * checks that it is the head it expects: `value` is undefined when the session is absent).
 */
export async function proveSessionHead(
  read: HeadsNodeReader,
  session: string,
): Promise<{ proof: SessionHeadProof; value: Uint8Array | undefined }> {
  const key = sessionKey(session);
  const end = await runReads(walk(key, direct), read);
  const siblings = await read(
    Array.from({ length: end.depth }, (_, d) => ({ depth: d + 1, prefix: prefixOf(key, d + 1, true) })),
  );
  const bitmap = new Uint8Array(Math.ceil(end.depth / 8));
  const listed: string[] = [];
  siblings.forEach((s, d) => {
    if (s === undefined) return;
    bitmap[d >> 3]! |= 0x80 >> (d & 7);
    listed.push(encodeBase64(hashOfNode(s)));
  });
  const proof: SessionHeadProof = { depth: end.depth, bitmap: encodeBase64(bitmap), siblings: listed };
  const node = end.node;
  if (node?.leaf && equalBytes(node.key, key)) return { proof, value: node.value };
  if (node?.leaf) proof.other = { key: encodeBase64(node.key), value: encodeBase64(node.value) };
  return { proof, value: undefined };
}

/**
 * How a stored index disagrees with `head` as `session`'s head: undefined when the stored nodes beside the session's
 * path hash, with the node where the path ends, to the stored root (the index is whole on this path), and that node
 * commits exactly `head` (or, `head` undefined, no head for the session); else `TREE_DAMAGED` (a node on the path
 * rewritten without its ancestors) or `ROLLBACK` (a whole index that commits another head or none: a head record set
 * back or removed under it); a `TREE_DAMAGED` carries what an append's index update over the path refuses with
 * (`appendProblem`). Reads the path one depth at a time, then the siblings in one round: made for a reader
 * that answers at once (the result is then at once too). Throws what `read` throws (a damaged node: `RECORD_CORRUPT`).
 */
export function indexedHeadProblem(
  read: HeadsNodeReader,
  session: string,
  head: SessionHead | undefined,
): IndexedHeadProblem | undefined | Promise<IndexedHeadProblem | undefined> {
  return runReads(indexedHeadSteps(session, head), read);
}

export interface IndexedHeadProblem {
  code: 'ROLLBACK' | 'TREE_DAMAGED';
  problem: string;
  /**
   * `TREE_DAMAGED`: what an update of the session's head over this path refuses with (`SessionHeadsUpdate`, an append's
   * index update: the deepest stored node on the path that does not hash its stored children), for a check made before
   * the append (ManifestLog.sessionAppendRefusal) to refuse with the append's own words.
   */
  appendProblem?: string;
}

function* indexedHeadSteps(session: string, head: SessionHead | undefined): Reads<IndexedHeadProblem | undefined> {
  const key = placedKey(session);
  // Down the path one depth a read (made for a reader that answers at once: no absent depths probed past its end).
  let root: HeadsNode | undefined;
  let depth = 0;
  let node: HeadsNode | undefined;
  const interior: Array<HeadsNode & { leaf: false }> = []; // the path's interior nodes, by depth
  for (; ; depth++) {
    if (depth > KEY_BITS)
      throw new ManifestError('RECORD_CORRUPT', 'session-heads index: an interior node at depth 256 (a damaged index)');
    [node] = yield [{ depth, prefix: prefixOf(key, depth) }];
    if (depth === 0) root = node;
    if (node === undefined || node.leaf) break;
    interior.push(node);
  }
  const got: Array<HeadsNode | undefined> = [
    root,
    ...(depth === 0
      ? []
      : yield Array.from({ length: depth }, (_, d) => ({ depth: d + 1, prefix: prefixOf(key, d + 1, true) }))),
  ];
  // Folded up from where the path ends; the deepest interior node on it that is not what its stored children hash to is
  // where an update over this path stops (SessionHeadsUpdate's `settle`, deepest first: below it, each stored node is
  // what was folded, so it is held to its own stored children there).
  let hash = hashOfNode(node);
  let unhashed = -1;
  for (let d = depth - 1; d >= 0; d--) {
    const sibling = hashOfNode(got[d + 1]);
    hash = bitAt(key, d) === 0 ? innerNodeHash(hash, sibling) : innerNodeHash(sibling, hash);
    if (unhashed < 0 && !equalBytes(hash, interior[d]!.hash)) unhashed = d;
  }
  if (!equalBytes(hash, hashOfNode(got[0])))
    return {
      code: 'TREE_DAMAGED',
      problem: `session-heads index: the nodes on the session's path do not hash to its root (a node at depth ${depth} or beside the path rewritten without its ancestors; fsck reports it)`,
      appendProblem: unhashedNodeProblem(unhashed), // the root at least is not what it folds to
    };
  const problem = leafProblem(node, key, head);
  return problem === undefined ? undefined : { code: 'ROLLBACK', problem };
}

/**
 * How `node`, where the path of the session whose key is `key` ends, fails to commit `head` as its head (undefined
 * `head`: no head), undefined when it commits exactly that.
 */
function leafProblem(node: HeadsNode | undefined, key: Uint8Array, head: SessionHead | undefined): string | undefined {
  const own = node?.leaf === true && equalBytes(node.key, key);
  if (head === undefined)
    return own ? 'the session-heads index commits a head for the session, which has no head record' : undefined;
  if (!own) return `the session-heads index commits no head for the session, whose head record names seq ${head.seq}`;
  if (!equalBytes((node as HeadsNode & { leaf: true }).value, headValue(head)))
    return `the session-heads index commits a head other than the head record's seq ${head.seq}`;
  return undefined;
}

const fail = (reason: string): { ok: false; reason: string } => ({ ok: false, reason });

/**
 * The root that `proof` implies for `session` with the leaf value `value` (the SHA-256 of its head, `headValue`),
 * or with no head (`value` undefined). Never throws on malformed input: it fails with a reason.
 */
export function rootFromSessionHeadProof(
  session: string,
  value: Uint8Array | undefined,
  proof: unknown,
): { ok: true; root: Uint8Array } | { ok: false; reason: string } {
  if (typeof session !== 'string') return fail('the session is not a string');
  const p = proof as Partial<SessionHeadProof> | null;
  if (typeof p !== 'object' || p === null) return fail('the proof is not an object');
  const depth = p.depth;
  if (typeof depth !== 'number' || !Number.isInteger(depth) || depth < 0 || depth > KEY_BITS)
    return fail('the proof depth is not an integer from 0 to 256');
  const bitmap = typeof p.bitmap === 'string' ? decodeBase64(p.bitmap) : undefined;
  if (!bitmap || bitmap.length !== Math.ceil(depth / 8)) return fail('the bitmap is not ⌈depth/8⌉ bytes of base64');
  if (depth & 7 && (bitmap[bitmap.length - 1]! & (0xff >> (depth & 7))) !== 0)
    return fail('the bitmap has bits beyond the depth');
  if (!Array.isArray(p.siblings) || p.siblings.length > KEY_BITS) return fail('the siblings are not a list');
  const siblings = p.siblings.map((s) => (typeof s === 'string' ? decodeBase64(s) : undefined));
  if (!siblings.every((s) => s?.length === 32)) return fail('a sibling is not 32 bytes of base64');
  let set = 0;
  for (let d = 0; d < depth; d++) set += bitAt(bitmap, d);
  if (set !== siblings.length) return fail(`the bitmap marks ${set} siblings, the proof lists ${siblings.length}`);
  const key = sessionKey(session);
  let hash: Uint8Array;
  if (value !== undefined) {
    if (p.other !== undefined) return fail("a membership proof names another key's leaf");
    hash = leafNodeHash(key, value);
  } else if (p.other === undefined) hash = EMPTY_HEADS_ROOT;
  else {
    const otherKey = typeof p.other?.key === 'string' ? decodeBase64(p.other.key) : undefined;
    const otherValue = typeof p.other?.value === 'string' ? decodeBase64(p.other.value) : undefined;
    if (otherKey?.length !== 32 || otherValue?.length !== 32) return fail('the other leaf is not two 32-byte values');
    if (equalBytes(otherKey, key)) return fail("the other leaf is the session's own: the session has a head");
    if (commonPrefixBits(otherKey, key) < depth) return fail('the other leaf is not on the path of the session');
    hash = leafNodeHash(otherKey, otherValue);
  }
  let next = siblings.length;
  for (let d = depth - 1; d >= 0; d--) {
    const sibling = bitAt(bitmap, d) ? siblings[--next]! : EMPTY_HEADS_ROOT;
    hash = bitAt(key, d) === 0 ? innerNodeHash(hash, sibling) : innerNodeHash(sibling, hash);
  }
  return { ok: true, root: hash };
}

/**
 * Verifies that in the index with root `root`, `session`'s head is `head`, or (head `undefined`) that the
 * session has no head. Never throws on malformed input: it fails with a reason.
 */
export function verifySessionHead(
  root: Uint8Array,
  session: string,
  head: SessionHead | undefined,
  proof: unknown,
): ProofResult {
  if (!isUint8Array(root) || root.length !== 32) return fail('the root is not 32 bytes');
  if (
    head !== undefined &&
    (typeof head !== 'object' ||
      head === null ||
      !Number.isSafeInteger(head.seq) ||
      head.seq < 0 ||
      typeof head.id !== 'string')
  )
    return fail('the head is not { seq, id }');
  const r = rootFromSessionHeadProof(session, head === undefined ? undefined : headValue(head), proof);
  if (!r.ok) return r;
  return equalBytes(r.root, root) ? { ok: true } : fail('the proof leads to another root');
}

/** The checkpoint extension line for a root. */
export const sessionHeadsLine = (root: Uint8Array): string => `${SESSION_HEADS_EXTENSION} ${encodeBase64(root)}`;

/**
 * The session-heads root a checkpoint's extension lines commit, `undefined` when it has none (a checkpoint from
 * before the index), or `'invalid'` when the line is there but malformed or repeated.
 */
export function sessionHeadsOf(extensions: readonly string[]): Uint8Array | undefined | 'invalid' {
  const lines = extensions.filter((e) => e.startsWith(`${SESSION_HEADS_EXTENSION} `) || e === SESSION_HEADS_EXTENSION);
  if (lines.length === 0) return undefined;
  if (lines.length > 1) return 'invalid';
  const root = decodeBase64(lines[0]!.slice(SESSION_HEADS_EXTENSION.length + 1));
  return root?.length === 32 ? root : 'invalid';
}
