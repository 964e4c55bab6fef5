/**
 * The auditor page's server (`audit-ui`) under hostile requests, written on a raw socket so that no client normalizes
 * them: traversal in every spelling (`..`, `%2e%2e`, `%2f`, `%00`, backslashes, doubled slashes, absolute-form
 * targets), seeded random request targets built of those pieces, very long URLs, control characters in the query,
 * odd methods, Host headers of other names. The contract: only the page, the bundle's files, its blobs and the side
 * files it was given are served (200 only for those exact paths, a query aside); every refusal is a plain status with a
 * fixed text that echoes nothing of the request; a 405 says which methods are taken (`Allow`, RFC 9110 15.5.6); and the
 * server goes on serving after all of it.
 */
import { mkdirSync, mkdtempSync, realpathSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { connect } from 'node:net';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startAuditServer, type AuditServer } from '../src/ops/audit-server.js';

interface Answer {
  status: number;
  headers: Map<string, string>;
  body: string;
  raw: string;
}

/** One request written as given on its own connection, and the answer read until the server closes it. */
function rawRequest(port: number, text: string): Promise<Answer> {
  return new Promise((done, fail) => {
    const socket = connect(port, '127.0.0.1');
    const chunks: Buffer[] = [];
    socket.on('data', (d: Buffer) => chunks.push(d));
    socket.on('error', fail);
    // A server that keeps the connection open fails the test, rather than hanging it.
    socket.setTimeout(10_000, () =>
      socket.destroy(new Error(`no close within 10 s: ${JSON.stringify(text.slice(0, 80))}`)),
    );
    socket.on('close', () => {
      const raw = Buffer.concat(chunks).toString('latin1');
      const end = raw.indexOf('\r\n\r\n');
      const head = (end < 0 ? raw : raw.slice(0, end)).split('\r\n');
      const headers = new Map(
        head.slice(1).map((l) => [l.slice(0, l.indexOf(':')).toLowerCase(), l.slice(l.indexOf(':') + 1).trim()]),
      );
      let body = end < 0 ? '' : raw.slice(end + 4);
      if (headers.get('transfer-encoding') === 'chunked') {
        let plain = '';
        for (let at = 0; ;) {
          const eol = body.indexOf('\r\n', at);
          const size = parseInt(body.slice(at, eol), 16);
          if (!(size > 0)) break;
          plain += body.slice(eol + 2, eol + 2 + size);
          at = eol + 2 + size + 2;
        }
        body = plain;
      }
      done({ status: Number(head[0]!.split(' ')[1]), headers, body, raw });
    });
    // Not half-closed: a server may drop a connection its client ended before it answered. Each request asks for
    // `Connection: close`, and a refused one is closed by the server.
    socket.write(text);
  });
}

/** A seeded generator (mulberry32): a failure replays. */
function random(seed: number): () => number {
  return () => {
    seed = (seed + 0x6d2b79f5) | 0;
    let t = Math.imul(seed ^ (seed >>> 15), 1 | seed);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

const BLOB = 'ab'.repeat(32);
/** What the request carries that no answer may echo. */
const MARK = 'zq7mark';

describe('audit-ui server, hostile requests on a raw socket', () => {
  let server: AuditServer;
  let port: number;
  let host: string;
  /** The exact paths served, and what each answers. */
  let served: Map<string, string>;
  let root: string;

  beforeAll(async () => {
    // Not tempDir(): that one is removed after each test, and this bundle serves the whole block.
    root = realpathSync(mkdtempSync(join(tmpdir(), 'hl-audit-hostile-')));
    const bundle = join(root, 'bundle');
    mkdirSync(join(bundle, 'blobs', 'blake3'), { recursive: true });
    writeFileSync(join(bundle, 'manifests.jsonl'), '{}\n');
    writeFileSync(join(bundle, 'bundle.json'), '{"version":1}\n');
    writeFileSync(join(bundle, 'blobs', 'blake3', BLOB), 'blob bytes');
    // Beside the bundle and in it, files that are never served.
    writeFileSync(join(root, 'secret.txt'), 'secret');
    writeFileSync(join(bundle, 'secret.txt'), 'secret');
    const page = join(root, 'index.html');
    writeFileSync(page, '<!doctype html><meta charset="utf-8" /><title>t</title>');
    server = await startAuditServer({
      page,
      bundle,
      trust: { text: '{"trust":1}', names: ['trust.json'] },
      since: { name: 'since.note', text: 'since\n' },
    });
    port = Number(new URL(server.url).port);
    host = `127.0.0.1:${port}`;
    served = new Map([
      ['/', 'page'],
      ['/index.html', 'page'],
      ['/trust.json', '{"trust":1}'],
      ['/since.note', 'since\n'],
      ['/bundle/manifests.jsonl', '{}\n'],
      ['/bundle/bundle.json', '{"version":1}\n'],
      [`/bundle/blobs/blake3/${BLOB}`, 'blob bytes'],
    ]);
  });
  afterAll(async () => {
    await server?.close();
    rmSync(root, { recursive: true, force: true });
  });

  const get = (target: string, method = 'GET', headers = `Host: ${host}\r\n`) =>
    rawRequest(port, `${method} ${target} HTTP/1.1\r\n${headers}Connection: close\r\n\r\n`);

  /** What a served path answers: the page (with its preload) or the file's bytes. */
  const expectServed = (path: string, a: Answer) => {
    expect(a.status, path).toBe(200);
    const want = served.get(path)!;
    if (want === 'page') expect(a.body, path).toContain('<meta name="handoff-ledger-preload"');
    else expect(a.body, path).toBe(want);
  };

  /** A refusal: its fixed text, no byte of the request in it. */
  const expectRefusal = (target: string, a: Answer, status: number, text: string) => {
    expect(a.status, target).toBe(status);
    expect(a.body, target).toBe(`${text}\n`);
    expect(a.raw, target).not.toContain(MARK);
    expect(a.raw, target).not.toContain('secret');
  };

  it('serves each path it serves, a query aside', async () => {
    for (const path of served.keys()) {
      expectServed(path, await get(path));
      expectServed(path, await get(`${path}?${MARK}=%1b%5b2J&x=..%2f..`));
    }
  });

  it('answers 404 "not found" to traversal in every spelling, and to files it does not serve', async () => {
    for (const target of [
      '/bundle/../secret.txt',
      '/bundle/secret.txt',
      '/secret.txt',
      '/../secret.txt',
      '/bundle/%2e%2e/secret.txt',
      '/bundle/%2E%2E%2Fsecret.txt',
      '/bundle/..%2fsecret.txt',
      '/bundle/..%5csecret.txt',
      '/bundle\\..\\secret.txt',
      '/bundle/manifests.jsonl%00',
      '/bundle/manifests.jsonl%00.png',
      '/bundle/%6danifests.jsonl',
      '/bundle//manifests.jsonl',
      '//bundle/manifests.jsonl',
      '/bundle/./manifests.jsonl',
      '/bundle/manifests.jsonl/',
      '/bundle/MANIFESTS.JSONL',
      '/bundle/blobs/blake3/../../manifests.jsonl',
      `/bundle/blobs/blake3/${BLOB.toUpperCase()}`,
      `/bundle/blobs/blake3/${BLOB}/`,
      `/bundle/blobs/blake3/${BLOB}%00`,
      `/bundle/blobs/blake3//${BLOB}`,
      '/bundle/blobs/blake3/',
      '/bundle/',
      '/bundle',
      '/index.html/',
      '/%2e%2e/%2e%2e/etc/passwd',
      '/witness-keys.txt', // not given to this server
      `/${MARK}`,
      `/bundle/${MARK}%1b%5b2J`,
      `http://${host}/bundle/manifests.jsonl`,
      `http://${host}/../secret.txt`,
      '*',
    ])
      expectRefusal(target, await get(target), 404, 'not found');
  });

  it('seeded random targets of traversal pieces: 200 exactly for a served path (a query aside), else a plain 404', async () => {
    const rand = random(0x5eed);
    const pieces = [
      '/',
      '/',
      '..',
      '.',
      '%2e',
      '%2E%2e',
      '%2f',
      '%5c',
      '\\',
      '%00',
      '%',
      '%zz',
      'bundle',
      'blobs',
      'blake3',
      BLOB,
      'manifests.jsonl',
      'bundle.json',
      'trust.json',
      'since.note',
      'index.html',
      'secret.txt',
      '?',
      '&',
      '=',
      ';',
      '%0d%0a',
      '%1b[',
      MARK,
      '\u00e9',
      '\u202e',
      '~',
      ':',
      '@',
      '//',
    ];
    let hits = 0;
    for (let i = 0; i < 400; i++) {
      const parts = Array.from(
        { length: 1 + Math.floor(rand() * 8) },
        () => pieces[Math.floor(rand() * pieces.length)],
      );
      // Sometimes a served path with pieces after it, so that near misses are tried as often as wild ones.
      const start = rand() < 0.5 ? [...served.keys()][Math.floor(rand() * served.size)]! : '/';
      // A served path with a query of the pieces, now and then: that is still the path.
      const tail = start !== '/' && rand() < 0.3 ? `?${parts.join('')}` : parts.join('');
      // Sent as UTF-8 percent-encoded where a request line cannot carry the character raw.
      const target = encodeURI(start + tail).replace(/%25/g, '%');
      const a = await get(target);
      const path = target.split('?')[0]!;
      if (served.has(path)) {
        expectServed(path, a);
        hits++;
      } else expectRefusal(target, a, 404, 'not found');
    }
    // Both sides were tried, near misses and hits.
    expect(hits).toBeGreaterThan(20);
    expect(hits).toBeLessThan(380);
  });

  it('refuses a request line with control characters (400) or a URL too long for its headers (431), and goes on', async () => {
    for (const target of [`/?${MARK}\x1b[2J`, `/bundle/manifests.jsonl\x00`, `/${MARK}\x7f`, `/\r/x`]) {
      const a = await get(target);
      expect(a.status, JSON.stringify(target)).toBe(400);
      expect(a.raw).not.toContain(MARK);
    }
    const long = await get(`/${MARK}${'a'.repeat(100_000)}`);
    expect(long.status).toBe(431);
    expect(long.raw).not.toContain(MARK);
    expectServed('/bundle/manifests.jsonl', await get('/bundle/manifests.jsonl'));
  });

  it('takes GET and HEAD only: any other method is 405 with Allow: GET, HEAD (RFC 9110 15.5.6), on any path', async () => {
    for (const method of ['POST', 'PUT', 'DELETE', 'PATCH', 'OPTIONS', 'TRACE', 'PROPFIND', 'MKCOL', 'PURGE'])
      for (const target of ['/', '/bundle/manifests.jsonl', `/${MARK}`, '*']) {
        const a = await get(target, method);
        expectRefusal(`${method} ${target}`, a, 405, 'read-only');
        expect(a.headers.get('allow'), `${method} ${target}`).toBe('GET, HEAD');
      }
    // CONNECT is not a request of this server: the connection is closed, nothing answered.
    expect((await get(host, 'CONNECT')).raw).toBe('');
    // HEAD answers as GET, without a body.
    for (const path of served.keys()) {
      const a = await get(path, 'HEAD');
      expect(a.status, path).toBe(200);
      expect(a.body, path).toBe('');
    }
  });

  it('answers a HEAD the headers of the GET, Content-Length included, without the body, on every route', async () => {
    // The page, the side files in memory, a bundle file, a blob, a refusal of a path (404) and of a Host (421). The
    // page and the side files were answered chunked to a GET and with no length at all to a HEAD.
    const routes: Array<[string, string]> = [
      ...[...served.keys()].map((path): [string, string] => [path, `Host: ${host}\r\n`]),
      [`/${MARK}`, `Host: ${host}\r\n`],
      ['/trust.json', `Host: attacker.example:${port}\r\n`],
      ['/trust.json', `Host: ${host}\r\nHost: attacker.example\r\n`],
    ];
    const headersOf = (a: Answer) => new Map([...a.headers].filter(([name]) => name !== 'date'));
    for (const [path, given] of routes) {
      const getAnswer = await get(path, 'GET', given);
      const head = await get(path, 'HEAD', given);
      expect(head.status, path).toBe(getAnswer.status);
      expect(headersOf(head), `${path} ${given.trim()}`).toEqual(headersOf(getAnswer));
      expect(getAnswer.headers.get('transfer-encoding'), path).toBeUndefined();
      expect(Number(getAnswer.headers.get('content-length')), path).toBe(Buffer.byteLength(getAnswer.body, 'latin1'));
      expect(head.body, path).toBe('');
    }
  });

  it('answers only to its own host name: any other Host (or none) is 421, whatever the path', async () => {
    for (const given of [
      `Host: attacker.example:${port}\r\n`,
      `Host: ${MARK}.127.0.0.1.nip.io:${port}\r\n`,
      `Host: LOCALHOST:${port}\r\n`,
      `Host: localhost.:${port}\r\n`,
      `Host: 127.0.0.1\r\n`,
      `Host: 127.0.0.1:${port + 1}\r\n`,
      `Host: [::1]:${port}\r\n`,
      `Host: 2130706433:${port}\r\n`,
      `Host: \r\n`,
    ])
      for (const target of ['/', '/bundle/manifests.jsonl', '/trust.json', `/bundle/blobs/blake3/${BLOB}`])
        expectRefusal(`${given.trim()} ${target}`, await get(target, 'GET', given), 421, 'misdirected request');
    // HTTP/1.0 may leave Host out: refused all the same.
    const old = await rawRequest(port, 'GET /trust.json HTTP/1.0\r\n\r\n');
    expectRefusal('HTTP/1.0 without Host', old, 421, 'misdirected request');
    // Its own names, after all of the above.
    expectServed('/trust.json', await get('/trust.json', 'GET', `Host: localhost:${port}\r\n`));
    expectServed('/', await get('/'));
  });

  it('refuses a request with more than one Host line (400, RFC 9112 3.2), whichever comes first, as Node does one with none', async () => {
    // Node keeps the first Host line; a proxy in front may route by the last: the request is ambiguous, not its first.
    const other = `attacker.example:${port}`;
    for (const given of [
      `Host: ${host}\r\nHost: ${other}\r\n`,
      `Host: ${other}\r\nHost: ${host}\r\n`,
      `Host: ${host}\r\nHost: ${host}\r\n`,
      `Host: ${host}\r\nhost: localhost:${port}\r\n`,
      `HOST: ${host}\r\nX-${MARK}: 1\r\nHost: ${host}\r\n`,
    ])
      for (const target of ['/', '/bundle/manifests.jsonl', '/trust.json', `/bundle/blobs/blake3/${BLOB}`])
        for (const method of ['GET', 'HEAD']) {
          const a = await get(target, method, given);
          expect(a.status, `${method} ${JSON.stringify(given)} ${target}`).toBe(400);
          if (method === 'GET')
            expectRefusal(`${JSON.stringify(given)} ${target}`, a, 400, 'more than one Host header');
        }
    // A request of HTTP/1.1 without Host is Node's own 400; a Host line folded over two (obs-fold) is refused by its
    // parser; one line naming two hosts is no name of the server's (421).
    expect((await rawRequest(port, 'GET /trust.json HTTP/1.1\r\nConnection: close\r\n\r\n')).status).toBe(400);
    expect((await get('/trust.json', 'GET', `Host: ${host}\r\n ${other}\r\n`)).status).toBe(400);
    expectRefusal(
      'two in one',
      await get('/trust.json', 'GET', `Host: ${host}, ${other}\r\n`),
      421,
      'misdirected request',
    );
    expectServed('/', await get('/'));
  });
});
