/**
 * A C2SP tlog-witness server (github.com/C2SP/C2SP tlog-witness.md) over node:http:
 *
 *   POST /add-checkpoint        old size, consistency proof, signed checkpoint → cosignature line (200),
 *                               or 400 / 403 / 404 / 409 (text/x.tlog.size) / 422 as the spec says
 *   GET  /<sha256(origin)>/checkpoint   the latest cosigned checkpoint of a log (monitor retrieval)
 *
 * Every request is bounded: its body in bytes (413 beyond it) and the whole request in time (408 for a
 * body that trickles in). Per log, check-then-store runs under one lock (the spec's race between two
 * add-checkpoint calls), and the new tree is durable before the cosignature is written to the socket.
 */
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { Socket } from 'node:net';
import { cosignCheckpoint, cosignerKeyHash } from '../../manifests/crypto/cosignature.js';
import { decodeBase64 } from '../../manifests/encoding/base64.js';
import type { NoteSigner, NoteVerifierKey } from '../../manifests/crypto/note.js';
import { ManifestError } from '../../manifests/errors.js';
import {
  decideAddCheckpoint,
  originOf,
  parseAddCheckpoint,
  TLOG_SIZE_CONTENT_TYPE,
  type AddCheckpointRequest,
} from '../../manifests/witness/add-checkpoint.js';
import { LedgerError } from '../errors.js';
import { KeyedMutex } from '../ledger/locks.js';
import { originHash, type StoredLog, type WitnessState } from './state.js';
import { MAX_TIMER_MS } from '../../store/abort.js';
import { shownValue } from '../../store/errors.js';

export interface WitnessServerOptions {
  signer: NoteSigner;
  /** origin → the log's checkpoint verifier keys. */
  logs: Map<string, NoteVerifierKey[]>;
  /**
   * The witness's state, or its opening: a server may listen before its state is open (the CLI opens it only once
   * the port is its own, so a refused start makes no state directory), and its requests wait for it. A request
   * that finds the opening failed is answered 500.
   */
  state: WitnessState | Promise<WitnessState>;
  /** Largest request body (default 64 KiB: a checkpoint and 63 proof lines take under 4 KiB; 1 to 2^53 − 1). */
  maxBodyBytes?: number;
  /** Time for a whole request, headers and body (default 10 s; 1 to 2^31 − 1 ms, the longest timer Node keeps). */
  requestTimeoutMs?: number;
  /** POSIX seconds for cosignature timestamps (tests). */
  now?: () => number;
  /**
   * One line per answered request, once (status, origin, reason): every add-checkpoint answer, and every other refusal
   * but a 404. The origin is the one the request's checkpoint names, once its body was read. The CLI escapes it. A
   * request answered 408 while its new tree was being stored has a second line once the write is done: status 200,
   * reason `stored size N after the request was answered 408`.
   */
  onRequest?: (event: { status: number; origin?: string; reason?: string }) => void;
}

/** An answer to a request, and what its report says of it. */
interface Reply {
  status: number;
  body: string;
  type?: string;
  origin?: string;
  reason?: string;
  /** The size this answer's request stored (a new tree cosigned): reported even when its 408 timer answered first. */
  stored?: number;
  /** The methods the resource takes: the `Allow` header a 405 must carry (RFC 9110, 15.5.6). */
  allow?: string;
}

/**
 * One request as its handler and its 408 timer both see it: whichever answers it first reports it, and the other finds
 * it answered. `origin` is set once the request's checkpoint was read.
 */
interface Exchange {
  req: IncomingMessage;
  res: ServerResponse;
  answered: boolean;
  origin?: string;
}

class HttpAnswer extends Error {
  constructor(
    readonly status: number,
    message: string,
    /** The methods the resource takes, for a 405's `Allow` header. */
    readonly allow?: string,
  ) {
    super(message);
  }
}

function readBody(req: IncomingMessage, limit: number): Promise<string> {
  return new Promise((resolve, reject) => {
    const declared = Number(req.headers['content-length']);
    if (Number.isFinite(declared) && declared > limit)
      return reject(new HttpAnswer(413, `the body is over ${limit} bytes`));
    const chunks: Buffer[] = [];
    let size = 0;
    let refused = false;
    req.on('data', (chunk: Buffer) => {
      // Past the limit the rest flows on and is dropped (the caller bounds how long that may last).
      if (refused) return;
      size += chunk.length;
      if (size > limit) {
        refused = true;
        chunks.length = 0;
        reject(new HttpAnswer(413, `the body is over ${limit} bytes`));
        return;
      }
      chunks.push(chunk);
    });
    req.on('end', () => {
      try {
        // A byte order mark is kept, so a body that begins with one is malformed (400) as the spec spells the
        // request, rather than read as the request after it.
        resolve(new TextDecoder('utf-8', { fatal: true, ignoreBOM: true }).decode(Buffer.concat(chunks)));
      } catch {
        reject(new HttpAnswer(400, 'the body is not UTF-8'));
      }
    });
    req.on('error', reject);
    // A connection dropped mid-body (or closed by the deadline) settles the read instead of leaving it pending.
    req.on('close', () => {
      if (!req.complete) reject(new HttpAnswer(408, 'the request ended before its body'));
    });
  });
}

function answer(
  res: ServerResponse,
  status: number,
  body: string,
  type = 'text/plain; charset=utf-8',
  close = false,
  allow?: string,
): void {
  if (res.headersSent || res.destroyed) return;
  res.writeHead(status, {
    'content-type': type,
    'content-length': Buffer.byteLength(body),
    'cache-control': 'no-store',
    ...(close ? { connection: 'close' } : {}),
    ...(allow !== undefined ? { allow } : {}),
  });
  res.end(body);
}

/**
 * The time of the last cosignature of a log this witness stored: its record's, or, in a record of an earlier version,
 * the time on this witness's own line of the stored note (its name and key hash); 0 when there is none.
 */
function lastCosigned(stored: StoredLog | undefined, signer: NoteSigner): number {
  if (stored === undefined) return 0;
  if (stored.timestamp !== undefined) return stored.timestamp;
  const keyHash = cosignerKeyHash(signer.name, signer.publicKey);
  let last = 0;
  for (const line of stored.note.slice(stored.note.indexOf('\n\n') + 2).split('\n')) {
    if (!line.startsWith(`\u2014 ${signer.name} `)) continue;
    const sig = decodeBase64(line.slice(signer.name.length + 3));
    if (sig?.length !== 76) continue;
    const view = new DataView(sig.buffer, sig.byteOffset);
    if (view.getUint32(0) === keyHash) last = Math.max(last, Number(view.getBigUint64(4)));
  }
  return last;
}

/** The witness's HTTP server, and how to wait for the requests it is still handling. */
export interface WitnessServer extends Server {
  /**
   * Settles once every request handler that began has ended, its state write included (after `closeAllConnections`
   * and `close`, before the state is closed).
   */
  settled(): Promise<void>;
}

/**
 * @throws LedgerError `INVALID_ARGUMENT` for a `requestTimeoutMs` that is not 1 to 2^31 − 1, or a `maxBodyBytes` that is
 *   not 1 to 2^53 − 1
 */
export function createWitnessServer(options: WitnessServerOptions): WitnessServer {
  const maxBody = options.maxBodyBytes ?? 64 * 1024;
  // NaN or Infinity took a body of any size (none is over them), 0 or less refused every one: the CLI's bounds.
  if (!(Number.isSafeInteger(maxBody) && maxBody >= 1))
    throw new LedgerError(
      'INVALID_ARGUMENT',
      `maxBodyBytes must be a whole number of bytes from 1 to ${Number.MAX_SAFE_INTEGER}, got ${shownValue(maxBody)}`,
    );
  const timeout = options.requestTimeoutMs ?? 10_000;
  // A deadline past the longest timer would answer every request 408 after 1 ms; 0, negative or NaN likewise.
  if (!(Number.isInteger(timeout) && timeout >= 1 && timeout <= MAX_TIMER_MS))
    throw new LedgerError(
      'INVALID_ARGUMENT',
      `requestTimeoutMs must be a whole number of milliseconds from 1 to ${MAX_TIMER_MS}, got ${shownValue(timeout)}`,
    );
  const now = options.now ?? (() => Math.floor(Date.now() / 1000));
  const perLog = new KeyedMutex();
  const report = options.onRequest ?? (() => {});
  const running = new Set<Promise<void>>();
  // Taken once: an opening that fails is each request's 500, never an unhandled rejection (which ends the process)
  // when it fails before any request came.
  const opened = Promise.resolve(options.state);
  opened.catch(() => {});

  /**
   * `gone`: the request is past its deadline, was already answered (408) or its connection closed; then nothing is
   * signed or stored.
   */
  async function addCheckpoint(body: string, gone: () => boolean, exchange: Exchange): Promise<Reply> {
    let request: AddCheckpointRequest;
    try {
      request = parseAddCheckpoint(body);
    } catch (err) {
      if (err instanceof ManifestError) return { status: 400, body: `${err.message}\n`, reason: err.message };
      throw err;
    }
    const origin = originOf(request.note);
    // A checkpoint without an origin line is malformed (400), not of a log this witness does not follow (404).
    if (origin === undefined) {
      const reason = 'malformed checkpoint: no origin line';
      return { status: 400, body: `${reason}\n`, reason };
    }
    // From here on the request is reported with its origin, by whichever answers it (its 408 timer too).
    exchange.origin = origin;
    const keys = options.logs.get(origin);
    if (!keys) return { status: 404, body: 'unknown log origin\n', origin, reason: 'unknown log origin' };
    return perLog.run(origin, async () => {
      // A request that waited in this queue past its deadline does no work: replays of the public checkpoint
      // must not hold the log's real submissions behind signatures nobody will read.
      if (gone())
        return { status: 408, body: 'the request took too long\n', origin, reason: 'the request took too long' };
      const state = await opened;
      const stored = await state.get(origin);
      const decision = decideAddCheckpoint(request, keys, stored);
      if (decision.status === 409)
        return {
          status: 409,
          body: `${decision.size}\n`,
          type: TLOG_SIZE_CONTENT_TYPE,
          origin,
          reason: decision.reason,
        };
      if (decision.status !== 200)
        return { status: decision.status, body: `${decision.reason}\n`, origin, reason: decision.reason };
      // Never older than the last cosignature of this log (kept in its state): a clock stepped back does not date a
      // later tree before an earlier one.
      const timestamp = Math.max(now(), lastCosigned(stored, options.signer));
      const line = await cosignCheckpoint(decision.text, options.signer, timestamp);
      // Checked again after the signer (a device may be slow): a request answered 408, or whose connection closed
      // (the witness shutting down closes them all), stores nothing.
      if (gone())
        return { status: 408, body: 'the request took too long\n', origin, reason: 'the request took too long' };
      const note = `${decision.text}\n${decision.logSignatures.join('')}${line}`;
      const next = { size: decision.checkpoint.size, root: decision.checkpoint.root, note, timestamp };
      // The point of no return: once this write is durable the witness will never cosign a tree that does
      // not extend this one, so it must happen before the cosignature leaves. The tree it already holds (same
      // size, same root: a replay, or new extension lines) changes nothing that must survive a crash, so the
      // note monitors are served is replaced in memory only, and a replay costs no flush.
      if (stored !== undefined && stored.size === next.size) state.serve(origin, next);
      else {
        await state.put(origin, stored?.size ?? 0, next);
        return { status: 200, body: line, origin, stored: next.size };
      }
      return { status: 200, body: line, origin };
    });
  }

  // A monitor's GET names a log by the hash of its origin: looked up, not hashed anew for every log on each GET.
  const byHash = new Map([...options.logs.keys()].map((o) => [originHash(o), o]));

  /** Connections a 413 closes once the rest of its body is in. */
  const closing = new WeakSet<Socket>();

  /**
   * A 413's connection: its answer says `Connection: close`, and node closes the socket as soon as the answer is
   * written (`destroySoon`). With the rest of the refused body still coming, that close resets the connection, and a
   * client still writing the body may lose the answer; so the rest is read and dropped first, for a second at most,
   * and only then is the connection closed. Nothing after the body on it is taken as a request.
   */
  function closeAfterBody(req: IncomingMessage): void {
    const socket = req.socket;
    closing.add(socket);
    const close = socket.destroySoon.bind(socket);
    let answered = false;
    let bodyIn = req.complete;
    const timer = setTimeout(() => socket.destroy(), 1000).unref();
    const go = () => {
      if (!answered || !bodyIn) return;
      clearTimeout(timer);
      close();
    };
    socket.destroySoon = () => {
      answered = true;
      go();
    };
    const done = () => {
      bodyIn = true;
      go();
    };
    req.once('end', done);
    req.once('close', done);
    req.resume();
  }

  /**
   * Answers a request and reports it, once: its handler and its 408 timer may both come to answer it (the handler of a
   * request that waits for the log's lock or the signer when its timer runs), and the second finds it answered. A
   * `quiet` answer is not reported. One thing more is reported of an answered request: a size its handler stored after
   * the timer answered 408 (the state's write was under way). The witness holds that tree from now on, and the
   * request log must not show a timeout alone for it; the client learns the size from the next 409.
   */
  function reply(exchange: Exchange, r: Reply, quiet = false): void {
    if (exchange.answered) {
      if (r.stored !== undefined)
        report({
          status: r.status,
          ...(exchange.origin !== undefined ? { origin: exchange.origin } : {}),
          reason: `stored size ${r.stored} after the request was answered 408`,
        });
      return;
    }
    exchange.answered = true;
    const origin = r.origin ?? exchange.origin;
    if (!quiet)
      report({
        status: r.status,
        ...(origin !== undefined ? { origin } : {}),
        ...(r.reason ? { reason: r.reason } : {}),
      });
    // Every 408 closes its connection, whichever answers it (the timer, or the handler that read the deadline off the
    // clock): the client was too slow or the server was, and the connection has had its time. The answer says so
    // (`Connection: close`) and the socket goes once it is written. The request goes with it: a socket closed after
    // its response has finished no longer ends the request, and the read of a body still trickling in would wait for
    // ever (its handler with it, and settled()).
    const close = r.status === 408 || r.status === 413;
    if (r.status === 408)
      exchange.res.on('finish', () => {
        exchange.req.destroy();
        exchange.req.socket.destroy();
      });
    // A 413 closes its connection too (`Connection: close`), once the rest of the refused body is read and dropped.
    if (r.status === 413) closeAfterBody(exchange.req);
    answer(exchange.res, r.status, r.body, r.type, close, r.allow);
  }

  async function handle(
    req: IncomingMessage,
    res: ServerResponse,
    deadline: number,
    exchange: Exchange,
  ): Promise<void> {
    const url = req.url ?? '/';
    if (url === '/add-checkpoint') {
      if (req.method !== 'POST') throw new HttpAnswer(405, 'add-checkpoint takes POST', 'POST');
      // The deadline is read off the clock as well: on a busy event loop the timer that answers 408 runs late, and a
      // request queued behind the log's lock must not start signing in the meantime. The socket is asked too: the
      // response is marked destroyed only once the socket's close has been emitted, a turn of the event loop after
      // `closeAllConnections` (the witness stopping) destroyed it, and a signer that returned in between stored its tree.
      const gone = () => res.headersSent || res.destroyed || req.socket.destroyed || performance.now() >= deadline;
      return reply(exchange, await addCheckpoint(await readBody(req, maxBody), gone, exchange));
    }
    const monitor = /^\/([0-9a-f]{64})\/checkpoint$/.exec(url);
    if (monitor) {
      if (req.method !== 'GET' && req.method !== 'HEAD') throw new HttpAnswer(405, 'checkpoint takes GET', 'GET, HEAD');
      const origin = byHash.get(monitor[1]!);
      const stored = origin === undefined ? undefined : await (await opened).get(origin);
      if (!stored) throw new HttpAnswer(404, 'no cosigned checkpoint for this log');
      return reply(exchange, { status: 200, body: stored.note }, true);
    }
    throw new HttpAnswer(404, 'not found');
  }

  const server = createServer(
    {
      requestTimeout: timeout + 1000,
      headersTimeout: Math.min(timeout, 60_000),
      maxHeaderSize: 8192,
      // Node checks the two timeouts above only this often (30 s by default): a slow sender held its slot so long.
      connectionsCheckingInterval: 1000,
    },
    (req, res) => {
      // A request after a refused body on a connection its 413 closes is not read: the answer said the connection ends.
      if (closing.has(req.socket)) {
        req.socket.destroy();
        return;
      }
      const exchange: Exchange = { req, res, answered: false };
      // Our own deadline as well as node's: it answers 408 and drops the connection of a slow sender.
      const deadline = performance.now() + timeout;
      const timer = setTimeout(() => {
        reply(exchange, { status: 408, body: 'the request took too long\n', reason: 'the request took too long' });
      }, timeout);
      const handled = handle(req, res, deadline, exchange)
        .catch((err: unknown) => {
          const status = err instanceof HttpAnswer ? err.status : 500;
          const reason = err instanceof HttpAnswer ? err.message : 'internal error';
          // A refusal is reported with its reason (a 404 not at all), anything else with its code and message.
          const reported =
            err instanceof HttpAnswer
              ? reason
              : `${(err as { code?: string }).code ?? 'ERROR'}: ${(err as Error).message}`;
          const allow = err instanceof HttpAnswer ? err.allow : undefined;
          reply(
            exchange,
            { status, body: `${reason}\n`, reason: reported, ...(allow ? { allow } : {}) },
            status === 404,
          );
        })
        .finally(() => {
          clearTimeout(timer);
          running.delete(handled);
        });
      running.add(handled);
    },
  );
  // Connections are cheap for a client and each holds a deadline's worth of our memory: a bound on them. A
  // connection that sends nothing (no request, so no timer of ours) or idles between requests goes after the
  // same deadline, so 512 of them cannot hold every slot for long.
  server.maxConnections = 512;
  server.on('connection', (socket) => socket.setTimeout(timeout, () => socket.destroy()));
  return Object.assign(server, {
    async settled(): Promise<void> {
      while (running.size > 0) await Promise.allSettled([...running]);
    },
  });
}
