/**
 * One spelling of the wire names: the identity header is written as a literal only in
 * contract/carrier.ts and the retrieval tool name only in rules/wire.ts; every other module imports
 * the constant (rules/wire.ts re-exports the header), so a rename (or a typo in
 * one copy) cannot leave a component speaking a different name. The scan reads code only: comments
 * may name the header in prose. Test files are outside the scan, since a test that spells the wire
 * name on its own is an independent check of what the code sends.
 */
import assert from 'node:assert/strict';
import { readdirSync, readFileSync } from 'node:fs';
import { join, relative } from 'node:path';
import { describe, test } from 'node:test';
import { fileURLToPath } from 'node:url';
import fc from 'fast-check';
import { CALLER_AGENT_HEADER, IDENTITY_HEADER, IDENTITY_HEADER_NAME, RETRIEVAL_TOOL } from './wire.ts';

const root = fileURLToPath(new URL('..', import.meta.url));
/** The one module allowed to spell each literal. */
const HOME: Readonly<Record<string, string>> = {
  [IDENTITY_HEADER]: 'contract/carrier.ts',
  [RETRIEVAL_TOOL]: 'rules/wire.ts',
  [CALLER_AGENT_HEADER]: 'rules/wire.ts',
};
const SKIP = new Set(['node_modules', 'dist', 'data', 'results']);
const SOURCE = /\.(ts|mts|mjs|js|cjs)$/;

/**
 * Literals still written out in files where a concurrent change owns the surrounding code, each with
 * the exact number of occurrences allowed, so a new copy in the same file still fails.
 */
const TOLERATED: Readonly<Record<string, Readonly<Record<string, number>>>> = {
  [RETRIEVAL_TOOL]: { 'controller/render/kagent.ts': 1 },
};

/**
 * The code of a TypeScript/JavaScript module with comments blanked out. String and template literal
 * contents are kept (that is where a copied name would live). A quote inside a regular expression
 * literal could open a false string; a single-quoted or double-quoted string ends at the line's end
 * to bound that, which also matches the language (such strings cannot span lines).
 */
export function codeOnly(source: string): string {
  let out = '';
  let i = 0;
  const n = source.length;
  // Stack of open template literals: the brace depth of each `${` currently being read as code.
  const templates: number[] = [];
  let braces = 0;
  const readQuoted = (quote: string): void => {
    out += source[i++];
    while (i < n && source[i] !== quote && source[i] !== '\n') {
      if (source[i] === '\\' && i + 1 < n) out += source[i++];
      out += source[i++];
    }
    if (i < n && source[i] === quote) out += source[i++];
  };
  const readTemplateText = (): void => {
    // Reads from just after a backtick or a closing `}` up to the closing backtick or the next `${`.
    while (i < n) {
      const c = source[i];
      if (c === '\\' && i + 1 < n) {
        out += source[i++];
        out += source[i++];
      } else if (c === '`') {
        out += source[i++];
        return;
      } else if (c === '$' && source[i + 1] === '{') {
        out += '${';
        i += 2;
        templates.push(braces);
        braces = 0;
        return;
      } else out += source[i++];
    }
  };
  while (i < n) {
    const c = source[i];
    const next = source[i + 1];
    if (c === '/' && next === '/') {
      while (i < n && source[i] !== '\n') i++;
    } else if (c === '/' && next === '*') {
      const end = source.indexOf('*/', i + 2);
      const stop = end < 0 ? n : end + 2;
      out += source.slice(i, stop).replace(/[^\n]/g, ' ');
      i = stop;
    } else if (c === "'" || c === '"') {
      readQuoted(c);
    } else if (c === '`') {
      out += source[i++];
      readTemplateText();
    } else if (c === '{') {
      braces++;
      out += source[i++];
    } else if (c === '}') {
      if (braces === 0 && templates.length > 0) {
        braces = templates.pop() ?? 0;
        out += source[i++];
        readTemplateText();
      } else {
        braces = Math.max(0, braces - 1);
        out += source[i++];
      }
    } else out += source[i++];
  }
  return out;
}

function sourceFiles(dir: string, into: string[] = []): string[] {
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    if (entry.name.startsWith('.') || SKIP.has(entry.name)) continue;
    const p = join(dir, entry.name);
    if (entry.isDirectory()) sourceFiles(p, into);
    else if (SOURCE.test(entry.name) && !entry.name.includes('.test.')) into.push(relative(root, p));
  }
  return into;
}

const count = (haystack: string, needle: string): number =>
  haystack.toLowerCase().split(needle.toLowerCase()).length - 1;

/** Files (other than the home) whose code spells `literal`, any case, beyond what is tolerated. */
function strays(literal: string): string[] {
  const tolerated = TOLERATED[literal] ?? {};
  return sourceFiles(root)
    .filter((file) => file !== HOME[literal])
    .flatMap((file) => {
      const found = count(codeOnly(readFileSync(join(root, file), 'utf8')), literal);
      return found > (tolerated[file] ?? 0) ? [`${file} (${found})`] : [];
    });
}

describe('wire names are spelled once, in their home module', () => {
  test('the identity header name appears in no other module', () => {
    assert.equal(IDENTITY_HEADER, IDENTITY_HEADER_NAME.toLowerCase());
    assert.deepEqual(strays(IDENTITY_HEADER), []);
  });

  test('the retrieval tool name appears in no other module', () => {
    assert.deepEqual(strays(RETRIEVAL_TOOL), []);
  });

  test('the authenticated-caller header (set by the gateway, read by retrieval) appears in no other module', () => {
    assert.deepEqual(strays(CALLER_AGENT_HEADER), []);
  });

  test('each home still defines its name (the scan looks for the right strings)', () => {
    const code = (file: string | undefined) => codeOnly(readFileSync(join(root, file ?? ''), 'utf8'));
    assert.equal(count(code(HOME[IDENTITY_HEADER]), IDENTITY_HEADER), 2);
    assert.equal(count(code(HOME[RETRIEVAL_TOOL]), RETRIEVAL_TOOL), 1);
    assert.equal(count(code(HOME[CALLER_AGENT_HEADER]), CALLER_AGENT_HEADER), 1);
  });
});

describe('codeOnly keeps literals and drops comments', () => {
  const name = 'x-fgentic-identity';
  test('a name in a line or block comment is dropped; in a string or template it is kept', () => {
    assert.equal(count(codeOnly(`// ${name}\nconst a = 1;`), name), 0);
    assert.equal(count(codeOnly(`/** ${name}\n * ${name} */ f();`), name), 0);
    assert.equal(count(codeOnly(`h['${name}'] = v;`), name), 1);
    assert.equal(count(codeOnly(`h["X-Fgentic-Identity"] = v;`), name), 1);
    assert.equal(count(codeOnly(`const t = \`a \${b} ${name}\`;`), name), 1);
    assert.equal(count(codeOnly(`const t = \`\${ {a: '${name}'}.a }\`; // ${name}`), name), 1);
    assert.equal(count(codeOnly(`const u = 'http://x'; const v = '${name}';`), name), 1);
    assert.equal(count(codeOnly(`const s = '// ${name}';`), name), 1);
  });

  test('property: a name in a string always survives, a name in a comment never does', () => {
    const safe = fc.stringMatching(/^[a-z ;=().,]{0,20}$/);
    fc.assert(
      fc.property(safe, safe, fc.constantFrom("'", '"', '`'), (before, after, quote) => {
        const code = `${before}${quote}${name}${quote}${after}`;
        assert.equal(count(codeOnly(code), name), 1);
        assert.equal(count(codeOnly(`${code} // ${name}\n/* ${name} */`), name), 1);
      }),
    );
  });
});
