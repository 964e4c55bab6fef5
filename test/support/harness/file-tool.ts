/**
 * The Harness's ordinary file tool, as a restricted account sees it: every path must resolve (real
 * path, symlinks followed) inside one of the account's allowed roots and outside every denied
 * directory (the ledger's own store, the Harness's internal folders). Anything else is refused with
 * `outside_allowed_roots`, the denial at the heart of the incident.
 */
import { constants } from 'node:fs';
import { lstat, mkdir, open, realpath } from 'node:fs/promises';
import { basename, dirname, isAbsolute, join, resolve, sep } from 'node:path';
import type { ModelToolCall, ModelToolDefinition } from '../../../src/index.js';

export type FileToolErrorCode = 'outside_allowed_roots' | 'invalid_path' | 'not_found';

export class FileToolError extends Error {
  override readonly name = 'FileToolError';
  constructor(
    readonly code: FileToolErrorCode,
    message: string,
  ) {
    super(message);
  }
}

export interface Account {
  /** The ledger principal of this user. */
  readonly principal: string;
  /** Directories the file tool may touch; a restricted user has only their project. */
  readonly allowedRoots: readonly string[];
}

export interface FileToolCall {
  op: 'write' | 'read';
  path: string;
  ok: boolean;
  code?: FileToolErrorCode;
}

const within = (path: string, dir: string) => path === dir || path.startsWith(dir.endsWith(sep) ? dir : dir + sep);

async function realpathOrUndefined(path: string): Promise<string | undefined> {
  try {
    return await realpath(path);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
    throw err;
  }
}

export class FileTool {
  /** Every call, allowed or refused, in order: tests assert that compaction and resume make none. */
  readonly calls: FileToolCall[] = [];

  private constructor(
    readonly account: Account,
    private readonly roots: readonly string[],
    private readonly denied: readonly string[],
  ) {}

  /** `denied`: directories refused even inside an allowed root (ledger store, Harness internals). */
  static async create(account: Account, options: { denied: readonly string[] }): Promise<FileTool> {
    const roots = await Promise.all(account.allowedRoots.map((r) => realpath(r)));
    const denied = await Promise.all(options.denied.map(async (d) => (await realpathOrUndefined(d)) ?? resolve(d)));
    return new FileTool(account, roots, denied);
  }

  static definitions(): ModelToolDefinition[] {
    const path = { type: 'string', description: 'Path, absolute or relative to the project' };
    return [
      {
        name: 'write_file',
        description: 'Write a text file',
        inputSchema: {
          type: 'object',
          properties: { path, content: { type: 'string' } },
          required: ['path', 'content'],
        },
      },
      {
        name: 'read_file',
        description: 'Read a text file',
        inputSchema: { type: 'object', properties: { path }, required: ['path'] },
      },
    ];
  }

  /**
   * The real path the call would touch. The deepest existing ancestor is resolved with realpath, so a
   * symlink anywhere on the way counts where it points; a dangling symlink is refused outright.
   */
  private async resolveTarget(path: unknown): Promise<string> {
    const root = this.roots[0];
    if (typeof path !== 'string' || path === '' || path.includes('\0') || root === undefined) {
      throw new FileToolError('invalid_path', `invalid path ${JSON.stringify(path)}`);
    }
    let existing = isAbsolute(path) ? resolve(path) : resolve(root, path);
    const rest: string[] = [];
    for (;;) {
      const real = await realpathOrUndefined(existing);
      if (real !== undefined) return join(real, ...rest);
      if (
        await lstat(existing).then(
          () => true,
          () => false,
        )
      ) {
        throw new FileToolError('outside_allowed_roots', `${path}: dangling symbolic link`);
      }
      rest.unshift(basename(existing));
      existing = dirname(existing);
    }
  }

  private async authorize(op: FileToolCall['op'], path: unknown): Promise<string> {
    try {
      const target = await this.resolveTarget(path);
      if (!this.roots.some((r) => within(target, r)) || this.denied.some((d) => within(target, d))) {
        throw new FileToolError(
          'outside_allowed_roots',
          `${String(path)} is outside the allowed roots of ${this.account.principal}`,
        );
      }
      return target;
    } catch (err) {
      this.calls.push({ op, path: String(path), ok: false, code: err instanceof FileToolError ? err.code : undefined });
      throw err;
    }
  }

  /** @throws FileToolError `outside_allowed_roots`, `invalid_path` */
  async write(path: string, content: string): Promise<void> {
    const target = await this.authorize('write', path);
    await mkdir(dirname(target), { recursive: true });
    // O_NOFOLLOW: a symlink planted at the final name after the check is not followed.
    const h = await open(
      target,
      constants.O_WRONLY | constants.O_CREAT | constants.O_TRUNC | constants.O_NOFOLLOW,
      0o644,
    );
    try {
      await h.writeFile(content);
    } finally {
      await h.close();
    }
    this.calls.push({ op: 'write', path, ok: true });
  }

  /** @throws FileToolError `outside_allowed_roots`, `invalid_path`, `not_found` */
  async read(path: string): Promise<string> {
    const target = await this.authorize('read', path);
    let h;
    try {
      h = await open(target, constants.O_RDONLY | constants.O_NOFOLLOW);
    } catch (err) {
      this.calls.push({ op: 'read', path, ok: false, code: 'not_found' });
      throw new FileToolError('not_found', `${path}: ${(err as Error).message}`);
    }
    try {
      const text = await h.readFile('utf8');
      this.calls.push({ op: 'read', path, ok: true });
      return text;
    } finally {
      await h.close();
    }
  }

  /** Runs a model's tool call; a refusal becomes the tool result text, as a Harness would report it. */
  async handle(call: ModelToolCall): Promise<{ ok: boolean; content: string; code?: FileToolErrorCode }> {
    const input = (call.input ?? {}) as { path?: unknown; content?: unknown };
    try {
      if (call.name === 'write_file') {
        await this.write(input.path as string, String(input.content ?? ''));
        return { ok: true, content: `wrote ${String(input.path)}` };
      }
      if (call.name === 'read_file') return { ok: true, content: await this.read(input.path as string) };
      return { ok: false, content: `error: unknown tool ${call.name}` };
    } catch (err) {
      if (!(err instanceof FileToolError)) throw err;
      return { ok: false, code: err.code, content: `error: ${err.code}: ${err.message}` };
    }
  }
}
