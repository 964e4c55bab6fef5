/**
 * Reading a body of bytes that arrives in chunks (a fetch answer's stream) no further than a bound: the auditor's page
 * reads what audit-ui serves through it (web/worker/bundle-source.ts), the witness client a witness's answers
 * (src/ledger/witnessing.ts). Isomorphic: web streams only, in a browser and in Node alike.
 */

/**
 * The first `length` bytes of `chunks`, end to end, in one array: the chunk itself when it is the only one (no copy),
 * else a new array of `length` bytes.
 */
export function joinChunks(chunks: readonly Uint8Array[], length: number): Uint8Array {
  if (chunks.length === 1 && chunks[0]!.length === length) return chunks[0]!;
  const out = new Uint8Array(length);
  let at = 0;
  for (const c of chunks) {
    if (at === length) break;
    const part = c.length <= length - at ? c : c.subarray(0, length - at);
    out.set(part, at);
    at += part.length;
  }
  return out;
}

/** What `readBodyUpTo` read. */
export interface BodyPrefix {
  /** The body's first bytes: all of it when it ended within the bound, else its first `limit` bytes. */
  bytes: Uint8Array;
  /** How many bytes came, the chunk that reached the bound included: at least `limit` when the body reached it. */
  seen: number;
}

/**
 * Reads `body` chunk by chunk until `limit` bytes have come or it ends, then cancels the rest, never read: a body that
 * goes on without end costs one chunk past `limit`, not all it sends. A body that breaks off throws what its stream
 * threw, or with `untilBreak` gives what came before the break. No body is no bytes.
 */
export async function readBodyUpTo(
  body: ReadableStream<Uint8Array> | null | undefined,
  limit: number,
  options: { untilBreak?: boolean } = {},
): Promise<BodyPrefix> {
  if (!body) return { bytes: new Uint8Array(0), seen: 0 };
  const chunks: Uint8Array[] = [];
  let seen = 0;
  const reader = body.getReader();
  try {
    while (seen < limit) {
      const { done, value } = await reader.read();
      if (done) break;
      chunks.push(value);
      seen += value.byteLength;
    }
  } catch (err) {
    if (!options.untilBreak) throw err;
  } finally {
    await reader.cancel().catch(() => {});
    reader.releaseLock();
  }
  return { bytes: joinChunks(chunks, Math.min(seen, limit)), seen };
}
