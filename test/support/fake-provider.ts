/**
 * A model provider on 127.0.0.1 that answers with recorded-shape JSON, so the adapters are tested with
 * the real SDKs speaking real HTTP, and never reach a real API.
 */
import { createServer, type IncomingMessage } from 'node:http';
import type { AddressInfo } from 'node:net';

export interface RecordedRequest {
  method: string;
  path: string;
  body: Record<string, unknown>;
}

export interface Reply {
  status?: number;
  body: unknown;
}

export interface FakeProvider {
  /** The base URL (http://127.0.0.1:<port>). */
  url: string;
  requests: RecordedRequest[];
  /** The replies for the next requests, in order; a request with none left gets a 500. */
  script(...replies: Reply[]): void;
  close(): Promise<void>;
}

async function readBody(req: IncomingMessage): Promise<Record<string, unknown>> {
  const chunks: Buffer[] = [];
  for await (const c of req) chunks.push(c as Buffer);
  const text = Buffer.concat(chunks).toString('utf8');
  return text === '' ? {} : (JSON.parse(text) as Record<string, unknown>);
}

export async function startFakeProvider(): Promise<FakeProvider> {
  const requests: RecordedRequest[] = [];
  let replies: Reply[] = [];
  const server = createServer((req, res) => {
    void readBody(req).then((body) => {
      requests.push({ method: req.method ?? '', path: req.url ?? '', body });
      const reply = replies.shift() ?? { status: 500, body: { error: { message: 'no scripted reply' } } };
      res.writeHead(reply.status ?? 200, { 'content-type': 'application/json' });
      res.end(JSON.stringify(reply.body));
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    requests,
    script: (...r) => {
      replies = r;
    },
    close: () => new Promise((resolve) => server.close(() => resolve())),
  };
}
