/**
 * The one escaper of printed data (manifests/encoding/printable.ts), over every code point: nothing a terminal acts
 * on (controls, invisible format characters, separators, lone surrogates) is left raw by `printable`, `printableJson`
 * or `printableExact`, and the escaped forms still say which character was there.
 */
import { describe, expect, it } from 'vitest';
import { spawnSync } from 'node:child_process';
import { mkdtempSync, readdirSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import {
  isTerminalSafe,
  escapedOnce,
  printableRow,
  printable,
  printableExact,
  printableJson,
  pastableShellWord,
  printableOnce,
  quoted,
  shellWord,
} from '../manifests/encoding/printable.js';

const ACTS = /[\p{Cc}\p{Cf}\p{Zl}\p{Zp}\p{Cs}\p{Default_Ignorable_Code_Point}]/u;

/** Every code point a terminal may act on, tab aside, as one-character strings (lone surrogates included). */
function actingCharacters(): string[] {
  const out: string[] = [];
  for (let cp = 0; cp < 0x110000; cp++) {
    const c = String.fromCodePoint(cp);
    if (cp !== 0x09 && ACTS.test(c)) out.push(c);
  }
  return out;
}

describe('printable', () => {
  const acting = actingCharacters();

  it('escapes every control, format character, separator and lone surrogate, astral ones included', () => {
    expect(acting.length).toBeGreaterThan(200);
    for (const c of [
      '\u0600',
      '\u{110bd}',
      '\u{e0001}',
      '\u{e0041}',
      '\u{1d173}',
      '\u202e',
      '\u009b',
      '\ud800',
      '\ufe0f',
      '\u{e0100}',
      '\u3164',
      '\u034f',
    ]) {
      expect(acting).toContain(c);
    }
    const raw = acting.filter((c) => ACTS.test(printable(`a${c}b`)));
    expect(raw.map((c) => c.codePointAt(0)!.toString(16))).toEqual([]);
    expect(printable('type\u{e0001}\u{e004f}')).toBe('type\\u{e0001}\\u{e004f}');
    expect(printable('a\\b\tc\u0001')).toBe('a\\\\b\tc\\x01');
  });

  it('quoted: every such character quoted as a JSON escape, one terminal-safe line printableOnce leaves as it is', () => {
    const text = acting.join('') + '"\\ é';
    const q = quoted(text);
    expect(JSON.parse(q)).toBe(text);
    expect(isTerminalSafe(q) && !q.includes('\n')).toBe(true);
    expect(printableOnce(q)).toBe(q);
    expect(quoted('p\u001b[2J\u009b\\"')).toBe('"p\\u001b[2J\\u009b\\\\\\""');
  });

  it('leaves a paired surrogate (an emoji) and ordinary text as they are', () => {
    expect(printable('ok 😀 é 中')).toBe('ok 😀 é 中');
  });

  it('isTerminalSafe says false of every such character, and of a lone high and low surrogate around a backslash', () => {
    expect(acting.filter((c) => c !== '\n' && isTerminalSafe(`x${c}`)).length).toBe(0);
    expect(isTerminalSafe('\ud800\\\udc00')).toBe(false);
    expect(isTerminalSafe('line one\nline \\two 😀')).toBe(true);
    expect(printableExact('origin\u{e0001}\n')).toBe('origin\\u{e0001}\n');
  });

  it('printableExact never prints two texts alike: a raw backslash escape, a missing final newline', () => {
    const texts = ['origin\\x00\n', 'origin\u0000\n', '\u0007x\n', '\u0007x', 'plain\n', 'plain', 'a\\b\n'];
    const printed = texts.map(printableExact);
    expect(new Set(printed).size).toBe(texts.length);
    expect(printableExact('plain note\n')).toBe('plain note\n'); // terminal-safe, no backslash: exact
    expect(printableExact('origin\\x00\n')).toBe('origin\\\\x00\n');
    expect(printableExact('\u0007x')).toBe('\\x07x\n\\ (no newline at end)\n');
  });
});

describe('printableOnce', () => {
  it("never escapes a quoted value twice: a line holding a raw control keeps its quotes' backslashes single", () => {
    // A message quoting a value (`quoted`: ESC as \u001b, a backslash as \\) beside a user's word put in raw.
    const line = `cannot use ${quoted('k\u001b\\')} with x\u001by\nz`;
    // Whole-line escaping (as printableOnce did) doubled them: `"k\\u001b\\\\"`, which reads as other characters.
    expect(printableOnce(line)).toBe('cannot use "k\\u001b\\\\" with x\\x1by\\x0az');
    // The printed quote is the value's JSON, as --json's message gives it.
    expect(printableOnce(line)).toContain(quoted('k\u001b\\'));
    // Made so once, passed unchanged again; a terminal-safe line and its tab as they are.
    expect(printableOnce(printableOnce(line))).toBe(printableOnce(line));
    expect(printableOnce('a\tb \\x1b é')).toBe('a\tb \\x1b é');
  });

  it('still escapes every character a terminal acts on put in raw, as printable escapes it', () => {
    const acting = actingCharacters();
    const printed = printableOnce(`${quoted('q')} ${acting.join('')}`);
    expect([...printed].filter((c) => ACTS.test(c))).toEqual([]);
    expect(printed).toBe(`"q" ${printable(acting.join(''))}`);
    expect(printableOnce('\u001b[2J\u202e')).toBe('\\x1b[2J\\u{202e}');
  });
});

describe('printableRow', () => {
  it('joins fields with tabs, each escaped as printable escapes it and its own tabs too', () => {
    expect(printableRow(['a', 'b\tc', 'd\u001b[2J', 'e\\x09'])).toBe('a\tb\\x09c\td\\x1b[2J\te\\\\x09\n');
    expect(printableRow(['x\ty']).split('\t')).toHaveLength(1);
  });

  it('prints a field escaped once already as it is, and escapes only its tabs, newlines and controls, not its backslashes', () => {
    const message = `record ${quoted('k\u001b"\\\t')} is corrupt`;
    expect(printableRow(['CODE', escapedOnce(message)])).toBe(`CODE\t${message}\n`);
    expect(printableRow([escapedOnce('c\nd'), escapedOnce('e\u001b'), escapedOnce('f\u202eg')])).toBe(
      'c\\x0ad\te\\x1b\tf\\u{202e}g\n',
    );
    expect(printableRow([escapedOnce('x\ty')]).split('\t')).toHaveLength(1);
  });

  it("keeps a finding message's quoted value as it was quoted beside a tab of the message (escaped, no column)", () => {
    // A finding naming a stored value with `quoted` (its ESC as \u001b, its backslash as \\) whose words hold a tab.
    const message = `head of ${quoted('s\u001b\\x')} names\tseq 3, a record of another session`;
    expect(message).toBe('head of "s\\u001b\\\\x" names\tseq 3, a record of another session');
    const row = printableRow(['SESSION_HEAD_MISMATCH', 's1', '3', escapedOnce(message)]);
    // The quote as --json's message gives it, each backslash once; the tab as \x09, so the row has its four fields.
    expect(row).toBe(
      'SESSION_HEAD_MISMATCH\ts1\t3\thead of "s\\u001b\\\\x" names\\x09seq 3, a record of another session\n',
    );
    expect(row.slice(0, -1).split('\t')).toHaveLength(4);
    // A quoted value holds no raw tab (JSON escapes it): only the message's own tab becomes \x09.
    expect(printableRow([escapedOnce(`${quoted('a\tb')}\tc`)])).toBe('"a\\tb"\\x09c\n');
    // Nothing a terminal acts on passes raw, whatever else the field holds.
    const acting = actingCharacters();
    const printed = printableRow([escapedOnce(`${quoted('q')}\t${acting.join('')}`)]).slice(0, -1);
    expect([...printed].filter((c) => ACTS.test(c))).toEqual([]);
  });
});

describe('printableJson', () => {
  it('leaves no such character raw inside strings, and means the same value', () => {
    const acting = actingCharacters();
    const value = { k: acting.join(''), [acting.slice(0, 50).join('')]: 1 };
    const text = printableJson(value);
    // Raw only the pretty-printer's own newlines.
    expect([...text].filter((c) => c !== '\n' && ACTS.test(c))).toEqual([]);
    expect(JSON.parse(text)).toEqual(value);
  });
});

describe('shellWord', () => {
  it('gives a word the shell reads back as exactly itself, running nothing', () => {
    const dir = mkdtempSync(join(tmpdir(), 'hl-shellword-'));
    const words = [
      'ed25519:AbC-_09',
      'kms:$(touch${IFS}pwned)',
      'a`touch pwned`b',
      "it's; touch pwned",
      'two  spaces\tand a tab',
      "''",
      '',
    ];
    for (const word of words) {
      const quoted = shellWord(word);
      const echoed = spawnSync('/bin/sh', ['-c', `printf %s ${quoted}`], { cwd: dir, encoding: 'utf8' });
      expect(echoed.stdout, word).toBe(word);
    }
    expect(shellWord('ed25519:AbC-_09')).toBe('ed25519:AbC-_09'); // nothing to quote
    expect(readdirSync(dir)).toEqual([]); // nothing ran
  });
});

describe('pastableShellWord', () => {
  it('gives the shell word of a word it prints as it is, and none for one that would print escaped or read as an escape', () => {
    expect(pastableShellWord("--a b'c")).toBe(shellWord("--a b'c"));
    expect(pastableShellWord('-x')).toBe('-x');
    for (const word of ['a\nb', 'a\tb', 'a\u001bb', 'a\u202eb', 'a\\u001bb', 'a\rb'])
      expect(pastableShellWord(word), JSON.stringify(word)).toBeUndefined();
  });
});
