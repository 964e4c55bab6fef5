/**
 * The local server behind `handoff-ledger audit-ui`: serves the built auditor's page and, read-only,
 * exactly the files a bundle consists of (bundle.json, manifests.jsonl, the tree files checkpoint.note,
 * proofs.jsonl and consistency.json, blobs/blake3/<64 hex>) and the side files it was given (trust file,
 * earlier checkpoint, witness keys: each at one fixed path, read at start and served from memory), on
 * 127.0.0.1 only. Nothing else is reachable: no directory listings, no other paths, no symlinks (files
 * are opened with O_NOFOLLOW; blobs only through real blobs/ and blobs/blake3/ directories), no method
 * but GET and HEAD, and no Host but the server's own, given once (so a DNS-rebinding page elsewhere cannot read the
 * bundle through it).
 */
import { constants, createReadStream, lstatSync } from 'node:fs';
import { open, readFile, realpath } from 'node:fs/promises';
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import { pipeline } from 'node:stream/promises';
import type { AddressInfo } from 'node:net';
import { basename, join, resolve } from 'node:path';
import {
  BUNDLE_CHECKPOINT_FILE,
  BUNDLE_CONSISTENCY_FILE,
  BUNDLE_HEADER_FILE,
  BUNDLE_MANIFESTS_FILE,
  BUNDLE_PROOFS_FILE,
  BUNDLE_HEADS_FILE,
  BUNDLE_TREE_FILES,
  BLOB_LINK_HEADER,
  linkedBlobText,
  symlinkedEntry,
  type BundleBlobLink,
  type BundleTreeFile,
} from '../../manifests/audit/bundle.js';
import { blobDirs, hasBlobDir, NOT_A_FILE } from './bundle-dir.js';

const READ = constants.O_RDONLY | constants.O_NOFOLLOW | constants.O_NONBLOCK;
const BLOB_PATH = /^\/bundle\/blobs\/blake3\/([0-9a-f]{64})$/;
/** The files at the bundle's top level the page may ask for, with their content types. */
const BUNDLE_FILES: ReadonlyMap<string, string> = new Map([
  [BUNDLE_HEADER_FILE, 'application/json'],
  [BUNDLE_MANIFESTS_FILE, 'text/plain; charset=utf-8'],
  [BUNDLE_CHECKPOINT_FILE, 'text/plain; charset=utf-8'],
  [BUNDLE_PROOFS_FILE, 'text/plain; charset=utf-8'],
  [BUNDLE_CONSISTENCY_FILE, 'application/json'],
  [BUNDLE_HEADS_FILE, 'text/plain; charset=utf-8'],
]);

export interface AuditServerOptions {
  /** The built page (dist/web/index.html). */
  page: string;
  /** The bundle directory to preload, if any. */
  bundle?: string;
  /**
   * Whether the bundle carries blobs (the page then checks them) even without a blobs/ directory; one that has a
   * blobs/ directory (or a symbolic link in its place, as verify takes it) when the page is requested carries them
   * anyway.
   */
  hasBlobs?: boolean;
  /** Preloaded auditor's settings (`audit-ui --require-blobs --expect --principal --session --max-bundle-bytes`). */
  requireBlobs?: boolean;
  expect?: 'full' | 'filtered';
  scope?: { principal?: string; session?: string };
  maxManifestsBytes?: number;
  /**
   * The trust to preload, if any: a trust file's path (read once, now, following a symlink as `verify` does) or the
   * text the CLI read and checked with the names of the files it read it from (`audit-ui --trust a.json --trust
   * b.json`: their union, merged as `verify` merges them). Served from memory either way; the page is told the names.
   */
  trust?: string | { text: string; names: readonly string[] };
  /** An earlier checkpoint to preload (`--since`): its file name and the text read (and bounded) by the CLI. */
  since?: { name: string; text: string };
  /** Witness keys and quorum to preload (`--witness-keys --quorum`), checked by the CLI as `verify` checks them. */
  witnessKeys?: { name: string; text: string; quorum: number };
  /** Default 0: any free port. */
  port?: number;
}

export interface AuditServer {
  url: string;
  close(): Promise<void>;
}

function escapeAttribute(text: string): string {
  return text.replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`);
}

const TRUST_PATH = '/trust.json';
const SINCE_PATH = '/since.note';
const WITNESS_KEYS_PATH = '/witness-keys.txt';

const TREE_FILES: readonly BundleTreeFile[] = BUNDLE_TREE_FILES;

/**
 * The tree files at the bundle's top level, whatever stands at each name: announced, so the page asks for those only
 * (an absent one is no error) and is told why one that is not a regular file cannot be read, as `verify` is.
 */
function treeFilesOf(dir: string): BundleTreeFile[] {
  return TREE_FILES.filter((name) => {
    try {
      lstatSync(join(dir, name));
      return true;
    } catch {
      return false;
    }
  });
}

/**
 * The page with a meta tag announcing what this server preloads (the page requests nothing without it). Made for
 * each request of the page: the bundle's tree files and blobs are announced as they are now, as `verify` run now
 * would find them.
 */
async function pageWithPreload(html: string, o: AuditServerOptions, bundle: string | undefined): Promise<string> {
  const preload: Record<string, unknown> = {};
  if (bundle)
    preload.bundle = {
      name: basename(resolve(o.bundle!)),
      base: '/bundle/',
      // A blobs/ (a directory, or a link the blobs' answers say is one); a header that counts blobs makes the page
      // check them too (as verify does).
      hasBlobs: o.hasBlobs === true || (await hasBlobDir(bundle)),
      tree: treeFilesOf(bundle),
    };
  if (o.requireBlobs) preload.requireBlobs = true;
  if (o.expect !== undefined) preload.expect = o.expect;
  if (o.scope?.principal !== undefined) preload.principal = o.scope.principal;
  if (o.scope?.session !== undefined) preload.session = o.scope.session;
  if (o.maxManifestsBytes !== undefined) preload.maxBundleBytes = o.maxManifestsBytes;
  if (o.trust)
    preload.trust = { url: TRUST_PATH, names: typeof o.trust === 'string' ? [basename(o.trust)] : o.trust.names };
  if (o.since) preload.since = { url: SINCE_PATH, name: o.since.name };
  if (o.witnessKeys)
    preload.witnessKeys = { url: WITNESS_KEYS_PATH, name: o.witnessKeys.name, quorum: o.witnessKeys.quorum };
  const meta = `<meta name="handoff-ledger-preload" content="${escapeAttribute(JSON.stringify(preload))}" />`;
  return html.replace('<meta charset="utf-8" />', () => `<meta charset="utf-8" />\n    ${meta}`);
}

const HEADERS = {
  'cache-control': 'no-store',
  'x-content-type-options': 'nosniff',
  'referrer-policy': 'no-referrer',
  'cross-origin-resource-policy': 'same-origin',
  // Read-only, but no other site may frame it (clicks steered through an invisible frame).
  'x-frame-options': 'DENY',
  'content-security-policy': "frame-ancestors 'none'",
};

/**
 * An answer held in memory (the page, a side file, a refusal) with its Content-Length: a HEAD is answered the headers
 * of the GET (RFC 9110, 9.3.2), without the body, where both were answered chunked before (a HEAD with no length).
 */
function answer(res: ServerResponse, status: number, headers: Record<string, string>, body: string): void {
  const bytes = Buffer.from(body, 'utf8');
  res.writeHead(status, { ...HEADERS, ...headers, 'content-length': String(bytes.length) });
  // Node sends no body in answer to a HEAD (its `_hasBody`); not handed one either.
  res.end(res.req.method === 'HEAD' ? undefined : bytes);
}

function refuse(res: ServerResponse, status: number, text: string, headers: Record<string, string> = {}): void {
  answer(
    res,
    status,
    {
      'content-type': 'text/plain; charset=utf-8',
      // A 405 says which methods the server takes (RFC 9110, 15.5.6), as the witness server's does.
      ...(status === 405 ? { allow: 'GET, HEAD' } : {}),
      ...headers,
    },
    `${text}\n`,
  );
}

/**
 * A blob behind a symbolic link, which verify reads as absent and says is a link: a 404 in verify's words, and the
 * link's place in `BLOB_LINK_HEADER` (the page's reader hands the verifier the reason verify's reader gives).
 */
function refuseLinkedBlob(res: ServerResponse, hex: string, link: BundleBlobLink['link']): void {
  refuse(res, 404, linkedBlobText(`blake3:${hex}`, link), { [BLOB_LINK_HEADER]: link });
}

const errno = (err: unknown) => (err as NodeJS.ErrnoException | undefined)?.code;

/**
 * Streams a regular file opened without following symlinks, its first `st.size` bytes (a file that grows meanwhile
 * never sends more than its Content-Length, one that shrinks has its connection cut). What `verify` reads in its place
 * decides the answer: nothing at the name is 404; for a file of the bundle (`kind` 'file') anything else that is not
 * a regular file is 422 (verify: BUNDLE_INVALID) and a name that cannot be opened otherwise (a symlink, no permission) 403 (verify:
 * BUNDLE_IO); for a blob, verify counts whatever is not a regular file as absent (404; a symlink's 404 says it is
 * one, as verify's finding does) and one it cannot open as BUNDLE_IO (403). An I/O error past the open (its stat, its close) is 500, or the connection cut once answered.
 */
function sendFile(
  req: IncomingMessage,
  res: ServerResponse,
  path: string,
  type: string,
  kind: 'file' | 'blob',
): Promise<void> {
  const name = kind === 'file' ? basename(path) : 'the blob';
  return sendFileOrThrow(req, res, path, type, kind, name).catch((err: unknown) => answerFailure(res, name, err));
}

/**
 * A file that failed past its open (its stat, or its close once sent: an I/O error) is the exchange's failure, never
 * an unhandled rejection that would end the server: a 500 while nothing was answered, else the connection cut (the
 * client sees the answer end short of its Content-Length, or whole).
 */
function answerFailure(res: ServerResponse, name: string, err: unknown): void {
  if (res.headersSent || res.destroyed) return void res.destroy();
  refuse(res, 500, `${name} cannot be read (${errno(err) ?? 'error'})`);
}

async function sendFileOrThrow(
  req: IncomingMessage,
  res: ServerResponse,
  path: string,
  type: string,
  kind: 'file' | 'blob',
  name: string,
): Promise<void> {
  let handle;
  try {
    handle = await open(path, READ);
  } catch (err) {
    const code = errno(err) ?? '';
    // A blob's own link (the directories above it are the bundle's: sendBlob): verify's words for it.
    if (kind === 'blob' && code === 'ELOOP') return refuseLinkedBlob(res, basename(path), 'file');
    if (code === 'ENOENT' || (kind === 'blob' && NOT_A_FILE.has(code))) return refuse(res, 404, 'not found');
    if (NOT_A_FILE.has(code) && code !== 'ELOOP') return refuse(res, 422, `${name} is not a regular file`);
    // A link in a bundle file's place: verify's words for it (BUNDLE_IO), which the page shows.
    if (code === 'ELOOP') return refuse(res, 403, symlinkedEntry(name));
    return refuse(res, 403, `${name} cannot be read (${code || 'error'})`);
  }
  try {
    const st = await handle.stat();
    if (!st.isFile())
      return kind === 'blob' ? refuse(res, 404, 'not found') : refuse(res, 422, `${name} is not a regular file`);
    res.writeHead(200, { ...HEADERS, 'content-type': type, 'content-length': String(st.size) });
    if (req.method === 'HEAD' || st.size === 0) return void res.end();
    const stream = createReadStream('', { fd: handle, autoClose: false, start: 0, end: st.size - 1 });
    // Settles however the exchange ends: the file sent, a read failed, or the client gone, before the stream was
    // piped (a response closed already never drains, so a pipe to it never ended and the handle was left open for the
    // garbage collector) or while it is sent. A file that shrank since its stat gives fewer bytes than the
    // Content-Length sent: the connection is cut rather than the answer ended short on it (kept alive, the client waited
    // for the rest until the keep-alive timeout, and took a pipelined request's answer for it).
    await pipeline(stream, res, { end: false }).then(
      () => (stream.bytesRead < st.size ? res.destroy() : res.end()),
      () => res.destroy(),
    );
  } finally {
    await handle.close();
  }
}

/**
 * A blob, from blobs/blake3/ of the bundle only: O_NOFOLLOW guards the file name alone, so a blobs/ or
 * blobs/blake3/ that is a symlink out of the bundle serves nothing (verify reads no blob through one either); the
 * 404 says it is a link, as verify does.
 */
async function sendBlob(req: IncomingMessage, res: ServerResponse, bundle: string, hex: string): Promise<void> {
  const dirs = await blobDirs(bundle);
  if (dirs === 'absent') return refuse(res, 404, 'not found');
  if (dirs !== 'real') return refuseLinkedBlob(res, hex, dirs);
  return sendFile(req, res, join(bundle, 'blobs', 'blake3', hex), 'application/octet-stream', 'blob');
}

/**
 * The Host headers the server answers on `port` (anything else is 421: a page of another site that a DNS name
 * rebound to 127.0.0.1 reads nothing). A browser leaves the scheme's default port, 80, out of Host.
 */
export function allowedHostsFor(port: number): Set<string> {
  const hosts = new Set([`127.0.0.1:${port}`, `localhost:${port}`]);
  if (port === 80) for (const host of ['127.0.0.1', 'localhost']) hosts.add(host);
  return hosts;
}

export async function startAuditServer(o: AuditServerOptions): Promise<AuditServer> {
  const page = await readFile(o.page, 'utf8');
  const trustText =
    o.trust === undefined ? undefined : typeof o.trust === 'string' ? await readFile(o.trust, 'utf8') : o.trust.text;
  // Resolved once, as verify resolves the directory it was named (`latest -> b1`): a link moved later is not followed.
  const bundle = o.bundle ? await realpath(resolve(o.bundle)) : undefined;
  let allowedHosts: Set<string> = new Set();
  const server = createServer((req, res) => {
    // Node keeps the first of several Host lines (req.headers.host), a proxy or another server may take the last: such a
    // request is refused whole (RFC 9112, 3.2: 400), never answered as the first line's.
    if ((req.headersDistinct.host?.length ?? 0) > 1) return refuse(res, 400, 'more than one Host header');
    if (!allowedHosts.has(req.headers.host ?? '')) return refuse(res, 421, 'misdirected request');
    if (req.method !== 'GET' && req.method !== 'HEAD') return refuse(res, 405, 'read-only');
    const path = (req.url ?? '/').split('?')[0]!;
    if (path === '/' || path === '/index.html') {
      return void pageWithPreload(page, o, bundle).then(
        (html) => answer(res, 200, { 'content-type': 'text/html; charset=utf-8' }, html),
        () => refuse(res, 500, 'cannot look at the bundle'),
      );
    }
    const served: [string | undefined, string] | undefined =
      path === TRUST_PATH
        ? [trustText, 'application/json']
        : path === SINCE_PATH
          ? [o.since?.text, 'text/plain; charset=utf-8']
          : path === WITNESS_KEYS_PATH
            ? [o.witnessKeys?.text, 'text/plain; charset=utf-8']
            : undefined;
    const [text, textType] = served ?? [undefined, ''];
    if (text !== undefined) return answer(res, 200, { 'content-type': textType }, text);
    if (bundle) {
      const name = path.startsWith('/bundle/') ? path.slice('/bundle/'.length) : '';
      const type = BUNDLE_FILES.get(name);
      if (type) return void sendFile(req, res, join(bundle, name), type, 'file');
      const blob = BLOB_PATH.exec(path);
      if (blob) return void sendBlob(req, res, bundle, blob[1]!);
    }
    refuse(res, 404, 'not found');
  });
  await new Promise<void>((done, fail) => {
    server.once('error', fail);
    server.listen(o.port ?? 0, '127.0.0.1', done);
  });
  const { port } = server.address() as AddressInfo;
  allowedHosts = allowedHostsFor(port);
  return {
    url: new URL(`http://127.0.0.1:${port}/`).href,
    close: () =>
      new Promise<void>((done) => {
        server.close(() => done());
        server.closeAllConnections();
      }),
  };
}
