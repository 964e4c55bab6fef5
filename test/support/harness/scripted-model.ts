/**
 * A deterministic model: it answers each request with the next step of a script, and fails loudly
 * when the request is not the kind the script expects (a turn where a compaction was due, or the
 * reverse). Answers that depend on context (the handoff after a restart) read the request itself.
 */
import {
  HANDOFF_CONTEXT_HEADER,
  SUBMIT_HANDOFF,
  type ModelAdapter,
  type ModelRequest,
  type ModelResponse,
} from '../../../src/index.js';
import type { Summary } from '../../../src/summary/summary.js';

export interface ScriptStep {
  expect: ModelRequest['purpose'];
  respond: ModelResponse | ((request: ModelRequest) => ModelResponse);
}

export interface ScriptedModel extends ModelAdapter {
  /** Every request received, in order. */
  readonly requests: ModelRequest[];
  push(...steps: ScriptStep[]): void;
  pending(): number;
}

export function scriptedModel(steps: ScriptStep[] = []): ScriptedModel {
  const queue = [...steps];
  const requests: ModelRequest[] = [];
  const model = async (request: ModelRequest): Promise<ModelResponse> => {
    requests.push(structuredClone({ ...request, signal: undefined }));
    const step = queue.shift();
    if (!step) throw new Error(`scripted model: no step left for a ${request.purpose} request`);
    if (step.expect !== request.purpose)
      throw new Error(`scripted model: expected a ${step.expect} request, got ${request.purpose}`);
    return structuredClone(typeof step.respond === 'function' ? step.respond(request) : step.respond);
  };
  return Object.assign(model, {
    requests,
    push: (...more: ScriptStep[]) => void queue.push(...more),
    pending: () => queue.length,
  });
}

let callCounter = 0;
// Fixed width, so token counts do not depend on how many calls earlier tests made.
const callId = () => `call_${String(++callCounter).padStart(6, '0')}`;

export const reply = (text: string): ScriptStep => ({ expect: 'turn', respond: { finishReason: 'stop', text } });

/** A turn in which the model writes a file with the ordinary file tool, then answers. */
export const writeThenReply = (path: string, content: string, text: string): ScriptStep[] => [
  {
    expect: 'turn',
    respond: {
      finishReason: 'tool_calls',
      toolCalls: [{ id: callId(), name: 'write_file', input: { path, content } }],
    },
  },
  reply(text),
];

/** The incident: asked to save the handoff, the model calls its file tool on the given path. */
export const writeFileCall = (path: string, content: string): ScriptStep => ({
  expect: 'turn',
  respond: { finishReason: 'tool_calls', toolCalls: [{ id: callId(), name: 'write_file', input: { path, content } }] },
});

export const readFileCall = (path: string): ScriptStep => ({
  expect: 'turn',
  respond: { finishReason: 'tool_calls', toolCalls: [{ id: callId(), name: 'read_file', input: { path } }] },
});

/** The fixed path: the summary comes back as the input of `submit_handoff`. */
export const submitHandoff = (summary: unknown): ScriptStep => ({
  expect: 'compaction',
  respond: { finishReason: 'tool_calls', toolCalls: [{ id: callId(), name: SUBMIT_HANDOFF, input: summary }] },
});

/** A compaction answer given verbatim (empty, invalid, truncated …). */
export const compactionAnswer = (response: ModelResponse): ScriptStep => ({ expect: 'compaction', respond: response });

/** What the model can read back from a rendered handoff message in its context. */
export interface HandoffSeen {
  task: string;
  nextSteps: string[];
}

/** Finds the handoff message in the request (by its header) and reads task and next steps from it. */
export function handoffIn(request: ModelRequest): HandoffSeen | undefined {
  const message = request.messages.find((m) => m.content.startsWith(HANDOFF_CONTEXT_HEADER));
  if (!message) return undefined;
  const lines = message.content.split('\n');
  const task = lines.find((l) => l.startsWith('Task: '))?.slice('Task: '.length) ?? '';
  const start = lines.indexOf('Next steps:');
  const nextSteps: string[] = [];
  for (let i = start + 1; start >= 0 && i < lines.length && /^\d+\. /.test(lines[i] ?? ''); i++) {
    nextSteps.push((lines[i] ?? '').replace(/^\d+\. /, ''));
  }
  return { task, nextSteps };
}

/**
 * A turn answered from the handoff in context: without one, the model admits it has lost the thread,
 * so a test that expects the informed answer fails when the summary did not reach the model.
 */
export const replyFromHandoff = (answer: (seen: HandoffSeen) => string): ScriptStep => ({
  expect: 'turn',
  respond: (request) => {
    const seen = handoffIn(request);
    return { finishReason: 'stop', text: seen ? answer(seen) : 'I have no record of what we were doing.' };
  },
});

/** A small valid summary for tests. */
export function sampleSummary(overrides: Partial<Summary> = {}): Summary {
  return {
    task: 'Add retry with backoff to the HTTP client in src/http.ts',
    state: 'Retry loop written and unit-tested; jitter not yet added',
    nextSteps: ['Add full jitter to the backoff delay', 'Document the retry options in README.md'],
    decisions: ['Retry only idempotent methods'],
    files: [{ path: 'src/http.ts', note: 'retry loop lives in request()' }],
    ...overrides,
  };
}
