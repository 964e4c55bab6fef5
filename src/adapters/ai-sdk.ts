/**
 * `handoff-ledger/adapters/ai-sdk`: a `ModelAdapter` over the Vercel `ai` SDK (an optional peer
 * dependency, imported on the first call), for any provider the Harness has a `LanguageModel` for.
 * Tool mode forces the `submit_handoff` tool; structured mode asks for an object output. Which schema
 * form is sent depends on the provider underneath: `json-schema` by default, `openai-strict` for
 * OpenAI models (whose provider sends strict schemas; the answer's nulls are then normalised).
 */
import type { LanguageModel, ModelMessage as AiMessage, ToolSet } from 'ai';
import type {
  ModelAdapter,
  ModelFinishReason,
  ModelRequest,
  ModelResponse,
  ModelToolCall,
} from '../compaction/model.js';
import { SUBMIT_HANDOFF } from '../compaction/tool.js';
import { summarySchemaFor, type SummarySchemaForm } from '../summary/schema-forms.js';
import {
  adapterOptions,
  compactionOnly,
  finishReasonOf,
  readJson,
  saysNothing,
  schemaFor,
  splitSystem,
  toolCall,
  toolInputObject,
  wholeNumberOption,
  withoutEmptyTurns,
  withProviderReason,
} from './shared.js';

export interface AiSdkAdapterOptions {
  model: LanguageModel;
  /** The summary schema form for the provider underneath (default `json-schema`). */
  schemaForm?: SummarySchemaForm;
  /** Retries of the `ai` SDK itself (default 2, the SDK's own default): a whole number from 0. */
  maxRetries?: number;
}

function messages(request: ModelRequest): AiMessage[] {
  const names = new Map<string, string>();
  const { rest } = splitSystem(request.messages);
  // Whichever provider is behind the SDK: what Anthropic's and Gemini's APIs refuse is left out for every one, as their
  // own adapters leave it out (a turn that says nothing), and a tool input goes as the object the SDK's parts take.
  return withoutEmptyTurns(rest).map((m): AiMessage => {
    if (m.role === 'tool') {
      const toolCallId = m.toolCallId ?? '';
      return {
        role: 'tool',
        content: [
          {
            type: 'tool-result',
            toolCallId,
            toolName: names.get(toolCallId) ?? 'unknown',
            output: { type: 'text', value: m.content },
          },
        ],
      };
    }
    if (m.role === 'assistant' && m.toolCalls?.length) {
      for (const c of m.toolCalls) names.set(c.id, c.name);
      return {
        role: 'assistant',
        content: [
          ...(saysNothing(m.content) ? [] : [{ type: 'text' as const, text: m.content }]),
          ...m.toolCalls.map((c) => ({
            type: 'tool-call' as const,
            toolCallId: c.id,
            toolName: c.name,
            input: toolInputObject(c.input),
          })),
        ],
      };
    }
    return { role: m.role === 'assistant' ? 'assistant' : 'user', content: m.content };
  });
}

/** Whether the model may be one of OpenAI's Responses API (a model id resolved by the SDK may be: treated as one). */
function viaResponses(model: LanguageModel): boolean {
  const provider = typeof model === 'string' ? undefined : (model as { provider?: unknown }).provider;
  return typeof provider !== 'string' || !/\.(chat|completion)$/.test(provider);
}

/**
 * The ai SDK's finish reasons. `content-filter` is what the SDK documents it to be, a content filter that stopped the
 * model (`content_filter`: SUMMARY_INCOMPLETE), as OpenAI's `content_filter` and Gemini's `SAFETY` are read by their
 * adapters. The SDK's providers also report a model's refusal so (OpenAI's `refusal`, Anthropic's stop reason
 * `refusal`), and the SDK does not tell the two apart where a refusal arrives (the errors of a missing forced tool call
 * or object carry only this reason): through the ai SDK a refusal is SUMMARY_INCOMPLETE, never MODEL_REFUSED. `error`,
 * `other` and anything else are `other` (SUMMARY_INCOMPLETE too).
 */
const FINISH: Record<string, ModelFinishReason> = {
  stop: 'stop',
  'tool-calls': 'tool_calls',
  length: 'length',
  'content-filter': 'content_filter',
};

/**
 * @example
 * import { openai } from '@ai-sdk/openai';
 * const model = aiSdkAdapter({ model: openai('gpt-5-mini'), schemaForm: 'openai-strict' });
 * await compact({ ledger, scope, model, transcript });
 */
export function aiSdkAdapter(given: AiSdkAdapterOptions): ModelAdapter {
  const options = adapterOptions('aiSdkAdapter', given, ['model', 'schemaForm', 'maxRetries']) as AiSdkAdapterOptions;
  const form = options.schemaForm ?? 'json-schema';
  summarySchemaFor(form); // an unknown form is refused here (INVALID_ARGUMENT), not as a model failure at compaction
  const strict = form === 'openai-strict';
  const maxRetries = wholeNumberOption('aiSdkAdapter', 'maxRetries', options.maxRetries, 0);
  return async (request) => {
    compactionOnly('aiSdkAdapter', request);
    const ai = await import('ai');
    const { generateText, jsonSchema, tool, Output } = ai;
    const tools: ToolSet = {};
    for (const t of request.tools ?? []) {
      tools[t.name] = tool({
        description: t.description,
        inputSchema: jsonSchema(schemaFor(t.name, t.inputSchema, form)),
        ...(strict && t.name === SUBMIT_HANDOFF ? { strict: true } : {}),
      });
    }
    const choice = request.toolChoice;
    const f = request.responseFormat;
    const { system } = splitSystem(request.messages);
    let result: Awaited<ReturnType<typeof generateText>>;
    // The last step's content: where the SDK throws for want of an object, its error carries only the joined text.
    let lastStep: readonly TextPart[] | undefined;
    let lastRawReason: string | undefined; // and its provider's own finish reason
    try {
      result = await generateText({
        model: options.model,
        messages: messages(request),
        ...(system === undefined ? {} : { system }),
        ...(Object.keys(tools).length > 0 ? { tools } : {}),
        ...(choice === undefined
          ? {}
          : { toolChoice: typeof choice === 'string' ? choice : { type: 'tool' as const, toolName: choice.name } }),
        ...(f
          ? {
              output: Output.object({
                schema: jsonSchema(summarySchemaFor(form)),
                name: f.name,
                ...(f.description ? { description: f.description } : {}),
              }),
            }
          : {}),
        ...(request.maxOutputTokens === undefined ? {} : { maxOutputTokens: request.maxOutputTokens }),
        ...(request.signal ? { abortSignal: request.signal } : {}),
        ...(maxRetries === undefined ? {} : { maxRetries }),
        onStepFinish: (step) => {
          lastStep = step.content;
          lastRawReason = step.rawFinishReason;
        },
        // For the ai SDK's OpenAI provider (other providers ignore the key): `store: false` to its Responses models (the
        // provider's default), as openaiAdapter sends it — they otherwise keep the transcript being summarised as a
        // stored response on OpenAI's side (a chat model stores nothing unless asked, and the OpenAI-compatible servers
        // it also reaches need not know the field); and strict mode only for the openai-strict form, the one that meets
        // its rules (every field required, no patterns), which it asks for unless told otherwise.
        providerOptions: {
          openai: {
            ...(viaResponses(options.model) ? { store: false } : {}),
            ...(strict ? {} : { strictJsonSchema: false }),
          },
        },
      });
    } catch (err) {
      // The SDK throws where the model did not deliver (no forced tool call, no parseable object);
      // both errors carry the answer, which extractSummary then judges like any other.
      if (ai.ToolChoiceViolationError.isInstance(err)) {
        const text = answerText(err.content);
        // The calls it made instead (another tool): extractSummary names them, as for every other dialect.
        const calls = err.content.flatMap((p) =>
          p.type === 'tool-call' ? [toolCall(p.toolCallId, p.toolName, p.input, strict)] : [],
        );
        return answer(err.finishReason, text, calls, undefined);
      }
      if (ai.NoObjectGeneratedError.isInstance(err)) {
        const text = lastStep ? answerText(lastStep) : (err.text ?? '');
        return answer(err.finishReason ?? 'other', text, [], readJson(text, strict), lastRawReason);
      }
      throw err;
    }
    // The SDK parsed each call's input, an invalid call's too (a call of a tool not offered: its JSON parsed, else
    // the text kept as a string). Parsed once only: a summary encoded twice reaches extractSummary as a string.
    const calls = result.toolCalls.map((c) => toolCall(c.toolCallId, c.toolName, c.input, strict, 'value'));
    // The text, not `result.output`: a cut-off or invalid answer must reach extractSummary, not throw here.
    const text = answerText(result.content);
    return answer(result.finishReason, text, calls, f ? readJson(text, strict) : undefined, result.rawFinishReason);
  };
}

/** A text part of the SDK's content (a step's, or an error's), with the provider's metadata of it. */
interface TextPart {
  type: string;
  text?: string;
  providerMetadata?: Record<string, Record<string, unknown> | undefined> | undefined;
}

/**
 * The answer's text from the content parts of the model's reply. A model that answers in phases (OpenAI's Responses
 * models: the provider marks each text part's message with `providerMetadata.<provider>.phase`) writes `commentary`
 * before its `final_answer`, and the SDK's `text` joins the two: the answer is then the final_answer's text alone, as
 * openaiAdapter reads it (a preamble joined to the JSON of a structured answer would break it).
 */
function answerText(content: readonly TextPart[]): string {
  const texts = content.filter(
    (p): p is TextPart & { text: string } => p.type === 'text' && typeof p.text === 'string',
  );
  const phaseOf = (p: TextPart): unknown =>
    Object.values(p.providerMetadata ?? {}).find((m) => m?.phase !== undefined)?.phase;
  const phased = texts.some((p) => phaseOf(p) === 'final_answer');
  return texts
    .filter((p) => !phased || phaseOf(p) === 'final_answer')
    .map((p) => p.text)
    .join('');
}

/**
 * Raw finish reasons that are no finished answer, whatever unified reason the SDK's provider gives them: Anthropic's
 * `pause_turn` ("we paused a long-running turn", to be sent back to continue), which the ai SDK's Anthropic provider
 * reads as `stop`; anthropicAdapter reads it as not finished (`other`), and so does this adapter.
 */
const UNFINISHED_RAW: ReadonlySet<string> = new Set(['pause_turn']);

/** The answer as a `ModelResponse`: `raw`, the provider's own finish reason, named when it did not finish. */
function answer(reason: string, text: string, calls: ModelToolCall[], value: unknown, raw?: unknown): ModelResponse {
  const paused = typeof raw === 'string' && UNFINISHED_RAW.has(raw);
  const out = withProviderReason({ finishReason: paused ? 'other' : finishReasonOf(FINISH, reason), text }, raw);
  if (calls.length > 0) out.toolCalls = calls;
  if (value !== undefined) out.output = value;
  return out;
}
