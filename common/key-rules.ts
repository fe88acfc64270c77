// The alphabet of object keys and segment names, in one function used by the master core (which
// refuses a bad key with INVALID_KEY, a bad segment name with INVALID_PARAMS) and by the client
// library (which refuses before sending). A valid text is 1..maxBytes bytes of UTF-8 encoding
// well-formed Unicode (no unpaired UTF-16 surrogate) with no control character: no C0
// (U+0000-U+001F), no DEL (U+007F), no C1 (U+0080-U+009F). Everything else is allowed: spaces,
// commas, slashes, quotes, any script, emoji. Why this alphabet: a newline would split a line of
// /get_all_keys into two keys; an unpaired surrogate has no UTF-8 form, so the protobuf encoder
// replaces it with U+FFFD and two different keys would become one.
//
// The check runs on every key a request creates, so the usual key (printable ASCII) takes one
// regular-expression scan, compiled to native code by V8: 35 ns for a 33-character key against 55
// ns for the general loop below (measured on the 2-CPU VM); the valid path allocates nothing.

/** Longest key, in UTF-8 bytes. */
export const MAX_KEY_BYTES = 4096;
/** Longest segment name, in UTF-8 bytes (every reply naming a segment repeats it). */
export const MAX_SEGMENT_NAME_BYTES = 1024;

/** Any character but U+0020..U+007E. */
const NOT_PRINTABLE_ASCII = /[^\x20-\x7e]/;

/** U+XXXX of a UTF-16 unit, for messages. */
function unit(c: number): string {
  return 'U+' + c.toString(16).toUpperCase().padStart(4, '0');
}

/**
 * Why `text` is not a valid key or name of at most `maxBytes` UTF-8 bytes (a phrase such as
 * "is empty", to follow "the key"), or undefined when it is valid. The one statement of the rule
 * (see the file comment).
 */
export function textProblem(text: unknown, maxBytes: number): string | undefined {
  if (typeof text !== 'string') return `is not a string (got ${text === null ? 'null' : typeof text})`;
  const n = text.length;
  if (n === 0) return 'is empty';
  // printable ASCII only: one byte per character, nothing else to check
  if (n <= maxBytes && !NOT_PRINTABLE_ASCII.test(text)) return undefined;
  // UTF-8 bytes: 1 per unit below U+0080, 2 below U+0800, 3 for the rest of the BMP, 4 per
  // surrogate pair (2 per unit). Counted only past the length any text could fit in.
  let bytes = 0;
  const count = n * 3 > maxBytes;
  for (let i = 0; i < n; i++) {
    const c = text.charCodeAt(i);
    if (c < 0x80) {
      if (c < 0x20 || c === 0x7f) return `holds the control character ${unit(c)} at index ${i}`;
      bytes++;
    } else if (c < 0xd800) {
      if (c <= 0x9f) return `holds the control character ${unit(c)} at index ${i}`;
      bytes += c < 0x800 ? 2 : 3;
    } else if (c < 0xe000) {
      // a high surrogate followed by a low one is one code point; anything else is unpaired
      const next = i + 1 < n ? text.charCodeAt(i + 1) : 0;
      if (c >= 0xdc00 || next < 0xdc00 || next > 0xdfff) return `holds an unpaired surrogate ${unit(c)} at index ${i} (not Unicode text)`;
      i++;
      bytes += 4;
    } else bytes += 3;
  }
  if (count && bytes > maxBytes) return `is ${bytes} UTF-8 bytes long; at most ${maxBytes}`;
  return undefined;
}

/** textProblem for a key: undefined when `key` is a valid key. */
export function keyProblem(key: unknown): string | undefined {
  return textProblem(key, MAX_KEY_BYTES);
}

/** textProblem for a segment name: undefined when `name` is a valid segment name. */
export function segmentNameProblem(name: unknown): string | undefined {
  return textProblem(name, MAX_SEGMENT_NAME_BYTES);
}
