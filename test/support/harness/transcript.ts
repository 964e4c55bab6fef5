/**
 * The Harness's transcript: an append-only JSON-lines file. Compaction never rewrites it; it only
 * records (in the signed manifest) how far the summary covers it.
 */
import { appendFile, readFile } from 'node:fs/promises';
import { digestOf, type Digest } from '../../../store/hash/digest.js';
import type { ModelMessage } from '../../../src/index.js';

export class Transcript {
  private constructor(
    readonly file: string,
    private readonly entries: ModelMessage[],
  ) {}

  /** Opens (or starts) the transcript at `file`; a restarted Harness sees every earlier entry. */
  static async open(file: string): Promise<Transcript> {
    const text = await readFile(file, 'utf8').catch((err: NodeJS.ErrnoException) => {
      if (err.code === 'ENOENT') return '';
      throw err;
    });
    const entries = text
      .split('\n')
      .filter((l) => l !== '')
      .map((l) => JSON.parse(l) as ModelMessage);
    return new Transcript(file, entries);
  }

  get length(): number {
    return this.entries.length;
  }

  /** Entries from index `from` on, as model messages (copies). */
  messages(from = 0): ModelMessage[] {
    return this.entries.slice(from).map((m) => structuredClone(m));
  }

  async append(message: ModelMessage): Promise<void> {
    await appendFile(this.file, JSON.stringify(message) + '\n', { flag: 'a' });
    this.entries.push(structuredClone(message));
  }

  /** The file's bytes: tests check that earlier bytes are always a prefix of later ones. */
  bytes(): Promise<Buffer> {
    return readFile(this.file).catch(() => Buffer.alloc(0));
  }

  /** BLAKE3 of the file's bytes: what a manifest's `covers.transcriptDigest` records. */
  async digest(): Promise<Digest> {
    return digestOf(await this.bytes());
  }
}
