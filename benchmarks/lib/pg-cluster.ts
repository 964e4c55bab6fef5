/**
 * A throw-away PostgreSQL cluster, shared by the tests (test/support/postgres.ts) and the benchmark's
 * PostgreSQL rows; it lives here because the build (tsconfig.build.json) compiles benchmarks/ but not test/.
 * No port to collide with: the server listens only on a private Unix socket, and is stopped and removed
 * afterwards (at process exit at the latest).
 */
import { execFile, spawnSync } from 'node:child_process';
import {
  appendFileSync,
  chownSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  realpathSync,
  rmSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { delimiter, dirname, join } from 'node:path';
import { promisify } from 'node:util';
import pg from 'pg';

const run = promisify(execFile);

/** The directory holding `initdb`, `pg_ctl` and `postgres`, or why none was found. */
export function findPostgresBin(): { bin: string } | { reason: string } {
  // An explicit directory wins (and is the only place looked at): pins a version, or simulates absence.
  const pinned = process.env.HANDOFF_LEDGER_PG_BIN;
  if (pinned !== undefined) {
    return existsSync(join(pinned, 'initdb')) && existsSync(join(pinned, 'pg_ctl'))
      ? { bin: pinned }
      : { reason: `HANDOFF_LEDGER_PG_BIN=${pinned} holds no initdb/pg_ctl` };
  }
  const candidates: string[] = [];
  for (const dir of (process.env.PATH ?? '').split(delimiter)) {
    if (dir && existsSync(join(dir, 'initdb'))) candidates.push(dirname(realpathSync(join(dir, 'initdb'))));
  }
  // Debian's postgresql package keeps the server binaries off PATH.
  const debian = '/usr/lib/postgresql';
  if (existsSync(debian)) {
    const versions = readdirSync(debian)
      .filter((v) => /^\d+$/.test(v))
      .sort((a, b) => Number(b) - Number(a));
    for (const v of versions) candidates.push(join(debian, v, 'bin'));
  }
  const bin = candidates.find((d) => existsSync(join(d, 'initdb')) && existsSync(join(d, 'pg_ctl')));
  return bin ? { bin } : { reason: 'initdb/pg_ctl not found on PATH or under /usr/lib/postgresql/*/bin' };
}

/**
 * A throw-away cluster: `initdb` into a temporary directory, listening only on a private Unix socket.
 * When the process runs as root, the cluster belongs to the `postgres` user (initdb refuses root).
 */
export class PgCluster {
  readonly dir: string;
  readonly socketDir: string;
  private readonly dataDir: string;
  private readonly logFile: string;
  private running = false;
  private readonly onExit = () => this.stopSync();

  private constructor(private readonly bin: string) {
    this.dir = mkdtempSync(join(tmpdir(), 'hl-pg-'));
    this.dataDir = join(this.dir, 'data');
    this.socketDir = join(this.dir, 'sock');
    this.logFile = join(this.dir, 'server.log');
  }

  /**
   * initdb + pg_ctl start; the cluster is removed by `stop()` (or at process exit at the latest).
   * @throws Error when initdb or pg_ctl fails (the temporary directory is removed first)
   */
  static async start(bin: string): Promise<PgCluster> {
    const cluster = new PgCluster(bin);
    try {
      await cluster.init();
      await cluster.pgCtl('start', '-l', cluster.logFile, '-t', '60');
    } catch (err) {
      rmSync(cluster.dir, { recursive: true, force: true });
      throw err;
    }
    cluster.running = true;
    process.once('exit', cluster.onExit);
    return cluster;
  }

  private async init(): Promise<void> {
    mkdirSync(this.socketDir, { mode: 0o700 });
    writeFileSync(this.logFile, '');
    if (process.getuid?.() === 0) {
      // initdb refuses to run as root: the cluster belongs to the postgres user, in a directory it owns.
      const uid = Number(spawnSync('id', ['-u', 'postgres'], { encoding: 'utf8' }).stdout.trim());
      const gid = Number(spawnSync('id', ['-g', 'postgres'], { encoding: 'utf8' }).stdout.trim());
      if (!Number.isInteger(uid) || uid <= 0)
        throw new Error('running as root, but there is no postgres user to own the cluster');
      for (const p of [this.dir, this.socketDir, this.logFile]) chownSync(p, uid, gid);
    }
    await this.exec('initdb', [
      '-D',
      this.dataDir,
      '-U',
      'postgres',
      '--auth=trust',
      '-E',
      'UTF8',
      '--locale=C',
      '--no-sync',
      '--no-instructions',
    ]);
    appendFileSync(
      join(this.dataDir, 'postgresql.conf'),
      [
        "listen_addresses = ''",
        `unix_socket_directories = '${this.socketDir}'`,
        'port = 5432',
        'max_connections = 100',
        "shared_buffers = '32MB'",
      ].join('\n') + '\n',
    );
  }

  private async exec(tool: string, args: string[]): Promise<string> {
    const path = join(this.bin, tool);
    const [cmd, argv] = process.getuid?.() === 0 ? ['runuser', ['-u', 'postgres', '--', path, ...args]] : [path, args];
    try {
      const { stdout } = await run(cmd, argv, { cwd: this.dir, timeout: 120_000 });
      return stdout;
    } catch (err) {
      const e = err as { stderr?: string; message: string };
      throw new Error(`${tool} ${args.join(' ')} failed: ${e.stderr || e.message}`, { cause: err });
    }
  }

  private pgCtl(action: string, ...args: string[]): Promise<string> {
    return this.exec('pg_ctl', [action, '-D', this.dataDir, '-w', ...args]);
  }

  /** A connection string for `database` over the private socket. */
  connectionString(database = 'postgres'): string {
    return `postgresql://postgres@/${encodeURIComponent(database)}?host=${encodeURIComponent(this.socketDir)}`;
  }

  /**
   * Creates an empty database and returns its connection string.
   * @throws RangeError for a name that is not a plain lower-case identifier; pg errors from CREATE DATABASE
   */
  async createDatabase(name: string): Promise<string> {
    if (!/^[a-z_][a-z0-9_]{0,62}$/.test(name)) throw new RangeError(`bad database name ${name}`);
    const client = new pg.Client({ connectionString: this.connectionString() });
    await client.connect();
    try {
      await client.query(`CREATE DATABASE "${name}"`);
    } finally {
      await client.end();
    }
    return this.connectionString(name);
  }

  /**
   * `pg_ctl restart -m fast`: every open connection is terminated, in-flight transactions roll back.
   * @throws Error when pg_ctl fails
   */
  async restart(): Promise<void> {
    await this.pgCtl('restart', '-m', 'fast', '-l', this.logFile, '-t', '60');
  }

  /**
   * `pg_ctl stop -m immediate`: the server crashes as on a power cut of its own (every server process quits at
   * once, no shutdown checkpoint, connections cut mid-transaction); `startAfterCrash` replays the WAL.
   * @throws Error when pg_ctl fails
   */
  async crash(): Promise<void> {
    await this.pgCtl('stop', '-m', 'immediate');
    this.running = false;
  }

  /**
   * Starts a server stopped by `crash` (crash recovery).
   * @throws Error when pg_ctl fails
   */
  async startAfterCrash(): Promise<void> {
    await this.pgCtl('start', '-l', this.logFile, '-t', '60');
    this.running = true;
  }

  /** Stops the server (fast shutdown) and removes its directory; never throws for a server already gone. */
  async stop(): Promise<void> {
    process.off('exit', this.onExit);
    if (this.running) {
      this.running = false;
      await this.pgCtl('stop', '-m', 'fast').catch(() => this.stopSync());
    }
    rmSync(this.dir, { recursive: true, force: true });
  }

  /** Last resort when the process exits without `stop()`: never leave a server running. */
  private stopSync(): void {
    if (!this.running) return;
    this.running = false;
    const pgCtl = join(this.bin, 'pg_ctl');
    const args = ['stop', '-D', this.dataDir, '-m', 'immediate', '-w'];
    if (process.getuid?.() === 0) spawnSync('runuser', ['-u', 'postgres', '--', pgCtl, ...args], { cwd: this.dir });
    else spawnSync(pgCtl, args);
    rmSync(this.dir, { recursive: true, force: true });
  }
}
