/**
 * Native BLAKE3 on a worker thread, for the filesystem store's streamed puts: the main thread encodes and
 * copies the next block while this thread hashes the last one, so a large publish uses both cores. Blocks
 * live in SharedArrayBuffers: posting one hands the thread a view of the same memory, not a copy, and the
 * block is not refilled before the thread has said it is done with it. One thread serves every put of the
 * process (it answers in the order it was asked; each put's state is keyed by an id); it holds the
 * process open only while it has work. Node only.
 */
import { createRequire } from 'node:module';
import { Worker } from 'node:worker_threads';

/**
 * The thread's program: CommonJS, evaluated, loading the same native package as the native backend.
 * Posting a SharedArrayBuffer costs far more than posting a number, so each block's memory is handed
 * over once ('share', keyed by a number) and named by that number afterwards ('forget' when the main
 * thread dropped it).
 */
const THREAD_SOURCE = `
const { parentPort, workerData } = require('node:worker_threads');
const { Blake3Hasher } = require(workerData.module);
const states = new Map();
const memory = new Map();
parentPort.on('message', (m) => {
  if (m.op === 'share') return void memory.set(m.memory, Buffer.from(m.buffer));
  if (m.op === 'forget') return void memory.delete(m.memory);
  let h = states.get(m.id);
  if (h === undefined) states.set(m.id, (h = new Blake3Hasher()));
  if (m.op === 'update') {
    h.update(memory.get(m.memory).subarray(m.offset, m.offset + m.length));
    parentPort.postMessage({});
  } else {
    states.delete(m.id);
    parentPort.postMessage({ digest: m.op === 'digest' ? new Uint8Array(h.digestBuffer()) : undefined });
  }
});
`;

type Request =
  { op: 'update'; id: number; memory: number; offset: number; length: number } | { op: 'digest' | 'drop'; id: number };

interface Waiter {
  resolve(reply: { digest?: Uint8Array }): void;
  reject(err: unknown): void;
}

class HashThread {
  private readonly waiting: Waiter[] = [];
  private nextId = 0;
  failure: Error | undefined;

  private constructor(private readonly worker: Worker) {
    worker.on('message', (reply: { digest?: Uint8Array }) => this.waiting.shift()?.resolve(reply));
    const die = (err: Error) => {
      this.failure ??= err;
      for (const w of this.waiting.splice(0)) w.reject(this.failure);
    };
    worker.on('error', die);
    worker.on('exit', (code) => die(new Error(`BLAKE3 hash thread exited with code ${code}`)));
    worker.unref();
  }

  static start(): HashThread {
    const module = createRequire(import.meta.url).resolve('@napi-rs/blake-hash');
    return new HashThread(new Worker(THREAD_SOURCE, { eval: true, workerData: { module } }));
  }

  newId(): number {
    return this.nextId++;
  }

  private readonly shared = new WeakMap<SharedArrayBuffer, number>();
  private nextMemory = 0;
  // The thread holds each shared block until the main thread let go of it.
  private readonly released = new FinalizationRegistry<number>((memory) => {
    if (!this.failure) this.worker.postMessage({ op: 'forget', memory });
  });

  /** The number the thread knows `buffer` by; handed over on first use. Answered by no reply. */
  memoryOf(buffer: SharedArrayBuffer): number {
    let memory = this.shared.get(buffer);
    if (memory === undefined) {
      memory = this.nextMemory++;
      this.shared.set(buffer, memory);
      this.released.register(buffer, memory);
      this.worker.postMessage({ op: 'share', memory, buffer });
    }
    return memory;
  }

  ask(request: Request): Promise<{ digest?: Uint8Array }> {
    if (this.failure) return Promise.reject(this.failure);
    return new Promise((resolve, reject) => {
      // Held open only while an answer is owed: an idle thread never keeps the process alive.
      if (this.waiting.length === 0) this.worker.ref();
      this.waiting.push({
        resolve: (reply) => {
          if (this.waiting.length === 0) this.worker.unref();
          resolve(reply);
        },
        reject,
      });
      this.worker.postMessage(request);
    });
  }
}

let thread: HashThread | undefined;

/** One put's hash state on the thread. */
export interface ThreadHasher {
  /**
   * Hashes `block`, a view of a SharedArrayBuffer (see `sharedBlock`), on the thread, after every block
   * given before it. Resolves once the thread is done reading it: only then may the block be refilled.
   */
  update(block: Uint8Array): Promise<void>;
  /** The digest of every block given, in order; ends this state. */
  digest(): Promise<Uint8Array>;
  /** Ends this state without a digest (a put that failed). */
  drop(): Promise<void>;
}

/**
 * A hash state on the process's hash thread (started on first use; started again after a crash).
 * @throws Error where the thread cannot be started (no native BLAKE3 for this platform)
 */
export function threadHasher(): ThreadHasher {
  if (!thread || thread.failure) thread = HashThread.start();
  const t = thread;
  const id = t.newId();
  return {
    async update(block) {
      if (!(block.buffer instanceof SharedArrayBuffer))
        throw new TypeError('hash thread: a block must be a view of a SharedArrayBuffer');
      const memory = t.memoryOf(block.buffer);
      await t.ask({ op: 'update', id, memory, offset: block.byteOffset, length: block.byteLength });
    },
    async digest() {
      const { digest } = await t.ask({ op: 'digest', id });
      return digest!;
    },
    async drop() {
      await t.ask({ op: 'drop', id });
    },
  };
}

/** A block of `size` bytes in shared memory, which the hash thread can read without a copy. */
export function sharedBlock(size: number): Buffer {
  return Buffer.from(new SharedArrayBuffer(size));
}
