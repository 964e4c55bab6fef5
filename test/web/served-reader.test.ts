/**
 * The page's reader of a bundle audit-ui serves (web/worker/bundle-source.ts, `kind: 'url'`), in Node with `fetch`
 * answered in-process: a blob is read no further than its signed size, whether or not the answer says its length,
 * and an answer that breaks off mid-body is `BUNDLE_IO`, as `verify`'s reader says of a read that fails.
 */
import { afterEach, describe, expect, it, vi } from 'vitest';
import type { BundleReader } from '../../manifests/audit/bundle.js';

// bundle-source.ts uses the DOM's fetch options (`cache`), which Node's types lack: imported by a name the root
// project's type check does not follow (web/tsconfig.json checks that module), as test/audit/thrown-values.test.ts does.
const BUNDLE_SOURCE: string = '../../web/worker/bundle-source.js';
const { readerFor } = (await import(BUNDLE_SOURCE)) as {
  readerFor(source: { kind: 'url'; base: string; hasBlobs: boolean; tree: string[] }): BundleReader;
};

const DIGEST = `blake3:${'a'.repeat(64)}` as const;
const CHUNK = 4096;

/**
 * A body of `chunks` chunks made only as they are read (no chunk is queued ahead of a read), counting those made;
 * with `breakAt`, the stream errors when that chunk is asked for, as a connection dropped mid-answer does.
 */
function body(chunks: number, breakAt?: number) {
  let made = 0;
  const stream = new ReadableStream<Uint8Array>(
    {
      pull(controller) {
        if (made === breakAt) return controller.error(new TypeError('terminated'));
        if (made === chunks) return controller.close();
        made++;
        controller.enqueue(new Uint8Array(CHUNK));
      },
    },
    { highWaterMark: 0 },
  );
  return { stream, made: () => made };
}

function served(response: Response): BundleReader {
  vi.stubGlobal('fetch', async () => response);
  return readerFor({ kind: 'url', base: 'http://127.0.0.1:1/bundle/', hasBlobs: true, tree: [] });
}

afterEach(() => {
  vi.unstubAllGlobals();
});

describe("the page's reader of a served bundle", () => {
  it('reads a blob without a content-length no further than one chunk past its signed size', async () => {
    const b = body(256); // 1 MiB, no content-length (a chunked answer)
    const reader = served(new Response(b.stream, { status: 200 }));
    const blob = await reader.readBlob!(DIGEST, 100);
    expect(blob).toBeDefined();
    expect(blob).not.toHaveProperty('bytes');
    expect((blob as { size: number }).size).toBeGreaterThan(100);
    // Before: the whole body was read (256 chunks) and then compared with the bound.
    expect(b.made()).toBeLessThanOrEqual(1);
  });

  it('reads a blob within its signed size whole, without a content-length', async () => {
    const b = body(2);
    const reader = served(new Response(b.stream, { status: 200 }));
    const blob = await reader.readBlob!(DIGEST, 2 * CHUNK);
    expect(blob).toEqual({ size: 2 * CHUNK, bytes: new Uint8Array(2 * CHUNK) });
  });

  it('refuses a blob whose answer breaks off mid-body as BUNDLE_IO naming it, not an internal error', async () => {
    const b = body(4, 2);
    const reader = served(new Response(b.stream, { status: 200 }));
    await expect(reader.readBlob!(DIGEST, 4 * CHUNK)).rejects.toMatchObject({
      name: 'AuditError',
      code: 'BUNDLE_IO',
      message: expect.stringContaining(`cannot read "${DIGEST}": `),
    });
  });

  it("reads no more of a refusal's body than the words it shows (422, 403), however long the body", async () => {
    for (const status of [422, 403]) {
      const b = body(256); // 1 MiB of "words", no content-length
      const reader = served(new Response(b.stream, { status }));
      await expect(reader.header(), String(status)).rejects.toMatchObject({
        name: 'AuditError',
        code: status === 422 ? 'BUNDLE_INVALID' : 'BUNDLE_IO',
      });
      // Before: Response.text() read all 256 chunks, to show 500 characters of them.
      expect(b.made(), String(status)).toBeLessThanOrEqual(1);
    }
  });
});

describe("the page's reader names what it cannot read quoted, as it quotes a side file's name", () => {
  // Put in raw, a URL or a name ran into the words around it, and one holding a control character had the page (and
  // the CLI's words it shares) escape the whole line; quoted (`quoted`: a JSON string), each is one value, escaped once.
  const BASE = 'http://127.0.0.1:1/bundle/';
  const words = (text: string, status: number) => new Response(text, { status });

  it.each([
    [
      403,
      '"checkpoint.note" is a symbolic link',
      `cannot read "${BASE}bundle.json": HTTP 403: "checkpoint.note" is a symbolic link`,
    ],
    [403, '', `cannot read "${BASE}bundle.json": HTTP 403`],
    [503, 'busy', `cannot read "${BASE}bundle.json": HTTP 503`],
    [422, '"bundle.json" is not a regular file', `"${BASE}bundle.json": "bundle.json" is not a regular file`],
    // The server's words with what a terminal acts on escaped once, the quotes in them as they were.
    [403, 'a \u001b[2J "q\\u001b"', `cannot read "${BASE}bundle.json": HTTP 403: a \\u001b[2J "q\\u001b"`],
  ])('HTTP %i with words %j', async (status, said, message) => {
    const reader = served(words(said, status));
    await expect(reader.header()).rejects.toMatchObject({ name: 'AuditError', message });
  });

  it('a URL holding a quote and a control character: quoted once, nothing raw', async () => {
    vi.stubGlobal('fetch', async () => new Response('', { status: 503 }));
    const reader = readerFor({ kind: 'url', base: 'http://127.0.0.1:1/b"\u001b/', hasBlobs: false, tree: [] });
    await expect(reader.header()).rejects.toMatchObject({
      message: 'cannot read "http://127.0.0.1:1/b\\"\\u001b/bundle.json": HTTP 503',
    });
  });

  it('a fetch that fails, and a blob whose answer breaks off: the URL and the digest quoted', async () => {
    vi.stubGlobal('fetch', async () => {
      throw new TypeError('Failed to fetch \u001b');
    });
    const reader = readerFor({ kind: 'url', base: BASE, hasBlobs: true, tree: [] });
    await expect(reader.header()).rejects.toMatchObject({
      code: 'BUNDLE_IO',
      message: `cannot read "${BASE}bundle.json": Failed to fetch \\u001b`,
    });
    const b = body(4, 2);
    await expect(served(new Response(b.stream, { status: 200 })).readBlob!(DIGEST, 4 * CHUNK)).rejects.toMatchObject({
      code: 'BUNDLE_IO',
      message: `cannot read "${DIGEST}": terminated`,
    });
  });

  it('a picked file the browser cannot read: its name in the bundle quoted', async () => {
    const unreadable = {
      size: 10,
      arrayBuffer: () => Promise.reject(new DOMException('The requested file could not be read', 'NotReadableError')),
    };
    const reader = readerFor({ kind: 'files', header: unreadable, manifests: new Blob([]) } as never);
    await expect(reader.header()).rejects.toMatchObject({
      code: 'BUNDLE_IO',
      message: expect.stringMatching(/^cannot read "bundle\.json": \S/),
    });
  });
});
