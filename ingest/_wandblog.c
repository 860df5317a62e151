/* The compiled core of the W&B reader: walk the `.wandb` log's block framing, check every chunk's CRC, and
 * decode the two common Record shapes (history rows of plain numbers, summary updates) without a Python call
 * per record. Every other record (config, run, stats, output, files, telemetry, a history row holding a
 * string, a media object, a nested key or a typed value, anything malformed) stops the walk and is handed
 * back whole to the exact Python path in ingest/wandb.py, so the meaning of a rare record lives in one place.
 *
 * Why C: the Python path costs ~3.5 us per 13-item history record (record loop, str objects, protobuf);
 * this walk does the framing, the CRC, the decode and the number parse in ~0.3 us per record.
 *
 * Framing (checked against wandb 0.31.0's wandb-core `core/pkg/leveldb/record.go`; mirrors `_log_records`
 * in ingest/wandb.py line for line, issues included): 32 KiB blocks counted from byte 0 (the 7-byte W&B
 * header sits in block 0); chunk = uint32 LE CRC | uint16 LE length | uint8 type (1 FULL, 2 FIRST, 3 MIDDLE,
 * 4 LAST) | payload; CRC = zlib's CRC-32 (IEEE) over type byte + payload, or LevelDB's masked CRC-32C.
 * CRC-32 is computed here (slicing-by-8), so the build needs no zlib headers.
 *
 * Record fields decoded here (wandb/proto/wandb_internal.proto, checked against the descriptors of wandb
 * 0.31.0's wandb_internal_pb2): Record.num = 1 (int64, ignored), Record.history = 2, Record.summary = 3;
 * HistoryRecord.item = 1 (repeated HistoryItem), HistoryRecord.step = 2 (HistoryStep: num = 1, int64);
 * HistoryItem / SummaryItem: key = 1, nested_key = 2 (repeated string), value_json = 16 (string);
 * SummaryRecord.update = 1. Any other field anywhere, a field repeated where protobuf would merge or
 * overwrite, strings that are not UTF-8 (protobuf rejects those), a nested key of more than one part, a
 * value that is not a plain JSON number: the record goes to Python. So this decoder accepts only records
 * whose meaning it knows completely, and gives them the meaning the Python path gives them.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <float.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "_wire.h" /* CRC-32C, varints, little-endian loads, interning: shared with _tfevents.c */

/* WANDBLOG_NO_X87: build without the x87 branch (benchmarks/bench_ingest_wandb.py --x87 measures what it buys). */
#if (defined(__x86_64__) || defined(__i386__)) && LDBL_MANT_DIG == 64 && !defined(WANDBLOG_NO_X87)
#define HAVE_X87 1
static long double pow10_ld[28];  /* 10^k, exact in the 64-bit significand for k <= 27 (5^27 < 2^64) */
#else
#define HAVE_X87 0
#endif

#define BLOCK 32768
#define HEADER 7
enum { FULL = 1, FIRST = 2, MIDDLE = 3, LAST = 4 };

/* ---------------------------------------------------------------- CRCs */

static uint32_t crc_table[8][256]; /* CRC-32 (IEEE, reflected 0xEDB88320), slicing-by-8: zlib's CRC */
static uint32_t type_crc[256];     /* the running CRC after the single type byte: the seed for the payload */

static uint32_t crc32_update(uint32_t c, const uint8_t *p, size_t n) {
    while (n >= 8) {
        uint64_t w;
        memcpy(&w, p, 8);
        w ^= c;
        c = crc_table[7][w & 0xff] ^ crc_table[6][(w >> 8) & 0xff] ^ crc_table[5][(w >> 16) & 0xff] ^
            crc_table[4][(w >> 24) & 0xff] ^ crc_table[3][(w >> 32) & 0xff] ^ crc_table[2][(w >> 40) & 0xff] ^
            crc_table[1][(w >> 48) & 0xff] ^ crc_table[0][w >> 56];
        p += 8;
        n -= 8;
    }
    while (n--) c = (c >> 8) ^ crc_table[0][(c ^ *p++) & 0xff];
    return c;
}

static void crc_init(void) {
#if HAVE_X87
    pow10_ld[0] = 1.0L;
    for (int k = 1; k < 28; k++) pow10_ld[k] = pow10_ld[k - 1] * 10.0L;
#endif
    for (uint32_t i = 0; i < 256; i++) {
        uint32_t c = i;
        for (int k = 0; k < 8; k++) c = (c & 1) ? (c >> 1) ^ 0xEDB88320u : c >> 1;
        crc_table[0][i] = c;
    }
    for (uint32_t i = 0; i < 256; i++)
        for (int t = 1; t < 8; t++) crc_table[t][i] = (crc_table[t - 1][i] >> 8) ^ crc_table[0][crc_table[t - 1][i] & 0xff];
    for (int t = 0; t < 256; t++) {
        uint8_t b = (uint8_t)t;
        type_crc[t] = crc32_update(0xFFFFFFFFu, &b, 1);  /* pre-inverted running state */
    }
    wire_init();
}

/* LevelDB's masked CRC-32C over type byte + payload: the fallback, computed only when CRC-32 fails. */
static uint32_t masked_crc32c(uint8_t typ, const uint8_t *p, size_t n) {
    return wire_mask(wire_crc32c_extend(wire_crc32c(&typ, 1), p, n));
}

static int chunk_crc_ok(uint32_t want, uint8_t typ, const uint8_t *p, size_t n) {
    if ((crc32_update(type_crc[typ], p, n) ^ 0xFFFFFFFFu) == want) return 1;
    return masked_crc32c(typ, p, n) == want;
}

/* ---------------------------------------------------------------- small helpers */

#define rd32 wire_rd32
#define rd16 wire_rd16
#define varint wire_varint

/* A length-delimited field's body: sets [*s, *s + *n), returns the pointer past it, NULL on overrun. */
static inline const uint8_t *lenfield(const uint8_t *p, const uint8_t *end, const uint8_t **s, size_t *n) {
    uint64_t len;
    p = varint(p, end, &len);
    if (!p || len > (uint64_t)(end - p)) return NULL;
    *s = p;
    *n = (size_t)len;
    return p + len;
}

/* Strict UTF-8 (RFC 3629: no overlongs, no surrogates, nothing above U+10FFFF), as protobuf checks strings. */
static int utf8_ok(const uint8_t *s, size_t n) {
    size_t i = 0;
    while (i + 8 <= n) {  /* ASCII, 8 bytes at a time: keys and JSON numbers almost always are */
        uint64_t w;
        memcpy(&w, s + i, 8);
        if (w & 0x8080808080808080ull) break;
        i += 8;
    }
    while (i < n) {
        uint8_t c = s[i];
        if (c < 0x80) { i++; continue; }
        int more;
        uint8_t lo = 0x80, hi = 0xBF;
        if (c >= 0xC2 && c <= 0xDF) more = 1;
        else if (c == 0xE0) { more = 2; lo = 0xA0; }
        else if ((c >= 0xE1 && c <= 0xEC) || c == 0xEE || c == 0xEF) more = 2;
        else if (c == 0xED) { more = 2; hi = 0x9F; }
        else if (c == 0xF0) { more = 3; lo = 0x90; }
        else if (c >= 0xF1 && c <= 0xF3) more = 3;
        else if (c == 0xF4) { more = 3; hi = 0x8F; }
        else return 0;
        if (n - i <= (size_t)more) return 0;
        if (s[i + 1] < lo || s[i + 1] > hi) return 0;
        for (int k = 2; k <= more; k++)
            if ((s[i + k] & 0xC0) != 0x80) return 0;
        i += more + 1;
    }
    return 1;
}

/* ---------------------------------------------------------------- JSON numbers, exactly as Python reads them */

static const double pow10_exact[23] = {1e0, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10, 1e11,
                                       1e12, 1e13, 1e14, 1e15, 1e16, 1e17, 1e18, 1e19, 1e20, 1e21, 1e22};

enum { NUM_VALUE = 0, NUM_FLOAT_OF_TEXT = 1 };

/* Parse `s[0:n]` when it is a JSON number (RFC 8259 grammar) or W&B's NaN / Infinity / -Infinity; 1 and
 * *out on success, 0 when it is anything else (the record then goes to Python).
 *
 * The result is bit-for-bit what Python gives: for NUM_VALUE what `float(json.loads(s))` gives (a JSON
 * integer is a Python int: "-0" is +0.0), for NUM_FLOAT_OF_TEXT what `float(s)` gives ("-0" is -0.0).
 * Python's float() is CPython's PyOS_string_to_double (David Gay's correctly rounded strtod), called here
 * for every text the exact fast path below does not cover. The fast path (Clinger 1990) is exact: when the
 * decimal significand has at most 15 digits (< 2^53, so exact as a double) and the power of ten is at most
 * 22 (10^22 is exact as a double), one IEEE multiplication or division rounds once, correctly: the same
 * double the correctly rounded strtod returns. Integers of more than 18 digits go to Python (polars' own
 * int-to-float conversion of huge Python ints is its business, not guessed here).
 */
static int parse_number(const uint8_t *s, size_t n, int mode, double *out) {
    if (n == 0 || n > 350) return 0;
    size_t i = 0;
    int neg = 0, is_int = 0;
    if (s[0] == 'N' || s[0] == 'I' || (s[0] == '-' && n > 1 && s[1] == 'I')) {
        if (!((n == 3 && memcmp(s, "NaN", 3) == 0) || (n == 8 && memcmp(s, "Infinity", 8) == 0) ||
              (n == 9 && memcmp(s, "-Infinity", 9) == 0)))
            return 0;
        goto slow;  /* PyOS_string_to_double gives Python's own NaN and infinities */
    }
    if (s[i] == '-') { neg = 1; i++; }
    if (i >= n) return 0;
    uint64_t mant = 0;
    int digits = 0;  /* significant digits held in mant (leading zeros not counted) */
    int dropped = 0; /* more digits than fit the fast path */
    int exp10 = 0;
    int int_digits = 0;
    if (s[i] == '0') { i++; int_digits = 1; }
    else if (s[i] >= '1' && s[i] <= '9') {
        while (i < n && s[i] >= '0' && s[i] <= '9') {
            if (digits < 19) { mant = mant * 10 + (uint64_t)(s[i] - '0'); digits++; }
            else { dropped = 1; exp10++; }
            i++;
            int_digits++;
        }
    } else return 0;
    is_int = 1;
    if (i < n && s[i] == '.') {
        i++;
        is_int = 0;
        if (i >= n || s[i] < '0' || s[i] > '9') return 0;
        while (i < n && s[i] >= '0' && s[i] <= '9') {
            if (mant == 0 && s[i] == '0') { exp10--; }
            else if (digits < 19) { mant = mant * 10 + (uint64_t)(s[i] - '0'); digits++; exp10--; }
            else if (s[i] != '0') dropped = 1;
            i++;
        }
    }
    if (i < n && (s[i] == 'e' || s[i] == 'E')) {
        i++;
        is_int = 0;
        int eneg = 0;
        if (i < n && (s[i] == '+' || s[i] == '-')) { eneg = s[i] == '-'; i++; }
        if (i >= n || s[i] < '0' || s[i] > '9') return 0;
        int e = 0;
        while (i < n && s[i] >= '0' && s[i] <= '9') {
            if (e < 100000) e = e * 10 + (s[i] - '0');
            i++;
        }
        exp10 += eneg ? -e : e;
    }
    if (i != n) return 0;
    if (is_int && int_digits > 18) return 0;
    if (!dropped && digits <= 15 && exp10 >= -22 && exp10 <= 22) {
        double v = (double)mant;
        v = exp10 < 0 ? v / pow10_exact[-exp10] : v * pow10_exact[exp10];
        *out = neg && !(is_int && mode == NUM_VALUE && v == 0) ? -v : v;  /* json: int("-0") is 0, so +0.0 */
        return 1;
    }
#if HAVE_X87
    /* 16 to 19 digits (a float's repr has up to 17): one x87 operation on exact operands (the significand
     * < 2^64, 10^k exact for k <= 27) rounds once to 64 bits; rounding that to 53 bits is then the correct
     * rounding of the exact value unless it lies exactly halfway between two doubles (its 11 extra bits are
     * 10000000000), where the first rounding may have moved it there: those go to dtoa. All results here
     * are normal doubles (1e-46 < |v| < 1e47), so the 11 bits are the ones double rounding drops. */
    if (!dropped && mant != 0 && exp10 >= -27 && exp10 <= 27) {
        long double r = (long double)mant;
        r = exp10 < 0 ? r / pow10_ld[-exp10] : r * pow10_ld[exp10];
        uint64_t sig;
        memcpy(&sig, &r, 8);
        if ((sig & 0x7FF) != 0x400) {
            double v = (double)r;
            *out = neg ? -v : v;
            return 1;
        }
    }
#endif
slow:;
    char buf[360];
    memcpy(buf, s, n);
    buf[n] = 0;
    char *endp = NULL;
    double v = PyOS_string_to_double(buf, &endp, NULL);  /* overflow gives +-inf, as float() does */
    if (v == -1.0 && PyErr_Occurred()) { PyErr_Clear(); return 0; }
    if (endp != buf + n) return 0;
    if (is_int && mode == NUM_VALUE && v == 0) v = 0.0;
    *out = v;
    return 1;
}

/* A `_step` as Python's int() reads W&B's text: -?(0|[1-9][0-9]{0,17}) only; anything else goes to Python. */
static int parse_step(const uint8_t *s, size_t n, int64_t *out) {
    size_t i = 0;
    int neg = 0;
    if (n && s[0] == '-') { neg = 1; i = 1; }
    if (i >= n || n - i > 18) return 0;
    if (s[i] == '0' && n - i > 1) return 0;
    int64_t v = 0;
    for (; i < n; i++) {
        if (s[i] < '0' || s[i] > '9') return 0;
        v = v * 10 + (s[i] - '0');
    }
    *out = neg ? -v : v;
    return 1;
}

/* ---------------------------------------------------------------- interned keys */

/* ---------------------------------------------------------------- the scanner object */

typedef struct {
    const uint8_t *key, *value;
    size_t key_len, value_len;
    int32_t id;
} Item;

typedef struct {
    PyObject_HEAD
    /* rows of the current chunk */
    int64_t *position, *step;
    double *wall_time, *value;
    int32_t *tag;
    uint8_t *has_wall;
    Py_ssize_t n, cap;
    /* interned keys: history tags and summary keys share ids; the table's keys are owned copies */
    WireTable table;
    PyObject *keys; /* list of bytes, in id order */
    char **key_ptr; /* by id: the slot's copy of the key, and its length */
    uint32_t *key_len;
    Py_ssize_t key_cap;
    /* summary updates of the current scan call: per key id, the latest value (offset into `data`, or into
     * `arena` when the record was reassembled from several chunks) */
    uint32_t *sum_gen;
    int64_t *sum_off;
    uint32_t *sum_len;
    uint8_t *sum_arena_flag;
    int32_t *sum_order;
    Py_ssize_t sum_cap, n_sum;
    uint32_t gen;
    char *arena;
    size_t arena_n, arena_cap;
    /* a record reassembled from FIRST / MIDDLE / LAST chunks */
    uint8_t *scratch;
    size_t scratch_n, scratch_cap;
    /* one record's items, decoded before they are committed */
    Item *items;
    Py_ssize_t items_cap;
    /* the key ids of the previous record's items, by index: W&B logs the same keys in the same order row after
     * row, so most lookups are one memcmp against this guess instead of a hash and a probe */
    int32_t *guess;
    Py_ssize_t guess_cap;
} Scanner;

static int grow_bytes(void **p, size_t *cap, size_t need, size_t width) {
    if (need <= *cap) return 0;
    size_t c = *cap ? *cap : 64;
    while (c < need) c *= 2;
    void *q = realloc(*p, c * width);
    if (!q) { PyErr_NoMemory(); return -1; }
    *p = q;
    *cap = c;
    return 0;
}

static int rows_reserve(Scanner *s, Py_ssize_t extra) {
    if (s->n + extra <= s->cap) return 0;
    Py_ssize_t cap = s->cap ? s->cap : 4096;
    while (cap < s->n + extra) cap *= 2;
#define GROW(field, type) do { void *q = realloc(s->field, (size_t)cap * sizeof(type)); \
        if (!q) { PyErr_NoMemory(); return -1; } s->field = q; } while (0)
    GROW(position, int64_t); GROW(step, int64_t); GROW(wall_time, double); GROW(value, double);
    GROW(tag, int32_t); GROW(has_wall, uint8_t);
#undef GROW
    s->cap = cap;
    return 0;
}

/* The id of key `p[0:n]`: -1 with an error set, -2 when it is not UTF-8 (protobuf would reject the record). */
static int32_t intern(Scanner *s, const uint8_t *p, size_t n) {
    if (n > UINT32_MAX) return -2;
    uint32_t h = wire_hash(p, n);
    WireSlot *slot = wire_table_find(&s->table, p, (uint32_t)n, h);
    if (slot->ptr) return slot->id;
    if (!utf8_ok(p, n)) return -2;
    char *copy = malloc(n ? n : 1);
    if (!copy) { PyErr_NoMemory(); return -1; }
    memcpy(copy, p, n);
    PyObject *b = PyBytes_FromStringAndSize((const char *)p, (Py_ssize_t)n);
    if (!b || PyList_Append(s->keys, b) < 0) { Py_XDECREF(b); free(copy); return -1; }
    Py_DECREF(b);
    if (s->table.n >= s->key_cap) {
        Py_ssize_t cap = s->key_cap ? s->key_cap * 2 : 256;
        char **kp = realloc(s->key_ptr, (size_t)cap * sizeof(char *));
        if (kp) s->key_ptr = kp;
        uint32_t *kl = realloc(s->key_len, (size_t)cap * sizeof(uint32_t));
        if (kl) s->key_len = kl;
        if (!kp || !kl) { free(copy); PyErr_NoMemory(); return -1; }
        s->key_cap = cap;
    }
    s->key_ptr[s->table.n] = copy;
    s->key_len[s->table.n] = (uint32_t)n;
    int32_t id = wire_table_add(&s->table, slot, (const uint8_t *)copy, (uint32_t)n, h);
    if (id < 0) { PyErr_NoMemory(); return -1; }
    if (s->table.n > s->sum_cap) {
        Py_ssize_t cap = s->sum_cap ? s->sum_cap * 2 : 256;
        uint32_t *g = realloc(s->sum_gen, cap * sizeof(uint32_t));
        if (g) s->sum_gen = g;
        int64_t *o = realloc(s->sum_off, cap * sizeof(int64_t));
        if (o) s->sum_off = o;
        uint32_t *l = realloc(s->sum_len, cap * sizeof(uint32_t));
        if (l) s->sum_len = l;
        uint8_t *a = realloc(s->sum_arena_flag, cap);
        if (a) s->sum_arena_flag = a;
        int32_t *r = realloc(s->sum_order, cap * sizeof(int32_t));
        if (r) s->sum_order = r;
        if (!g || !o || !l || !a || !r) { PyErr_NoMemory(); return -1; }
        memset(s->sum_gen + s->sum_cap, 0, (cap - s->sum_cap) * sizeof(uint32_t));
        s->sum_cap = cap;
    }
    return id;
}

/* The id of the i-th item's key of a record: the previous record's i-th key when it is the same, else
 * interned (-1 error set, -2 not UTF-8). */
static int32_t key_id(Scanner *s, Py_ssize_t i, const uint8_t *p, size_t n) {
    if (i < s->guess_cap) {
        int32_t g = s->guess[i];
        if (g >= 0) {
            if (s->key_len[g] == n && memcmp(s->key_ptr[g], p, n) == 0) return g;
        }
    } else {
        Py_ssize_t cap = s->guess_cap ? s->guess_cap : 64;
        while (cap <= i) cap *= 2;
        int32_t *q = realloc(s->guess, (size_t)cap * sizeof(int32_t));
        if (!q) { PyErr_NoMemory(); return -1; }
        for (Py_ssize_t k = s->guess_cap; k < cap; k++) q[k] = -1;
        s->guess = q;
        s->guess_cap = cap;
    }
    int32_t id = intern(s, p, n);
    if (id >= 0) s->guess[i] = id;
    return id;
}

/* ---------------------------------------------------------------- record decoding */

/* Decode a HistoryItem / SummaryItem: exactly one of key or a one-part nested_key, and one value_json.
 * 1: decoded; 0: not this shape. */
static int decode_item(const uint8_t *p, const uint8_t *end, Item *it, int need_value) {
    const uint8_t *key = NULL, *nk = NULL, *vj = NULL;
    size_t key_n = 0, nk_n = 0, vj_n = 0;
    while (p < end) {
        if (*p == 0x0a) {          /* key = 1, length-delimited */
            if (key) return 0;
            p = lenfield(p + 1, end, &key, &key_n);
        } else if (*p == 0x12) {   /* nested_key = 2: one part only */
            if (nk) return 0;
            p = lenfield(p + 1, end, &nk, &nk_n);
        } else if (*p == 0x82 && p + 1 < end && p[1] == 0x01) { /* value_json = 16 */
            if (vj) return 0;
            p = lenfield(p + 2, end, &vj, &vj_n);
        } else return 0;
        if (!p) return 0;
    }
    if ((key != NULL) == (nk != NULL)) return 0;
    if (!vj || (need_value && vj_n == 0)) return 0;
    if (key) { it->key = key; it->key_len = key_n; }
    else { it->key = nk; it->key_len = nk_n; }
    it->value = vj;
    it->value_len = vj_n;
    return 1;
}

/* Collect the items of a HistoryRecord / SummaryRecord body into s->items; fields other than item (1) and,
 * for history, step (2) make it not this shape. Returns the item count, -1 on error (set), -2 not this shape. */
static Py_ssize_t decode_items(Scanner *s, const uint8_t *p, const uint8_t *end, int history, int *has_step,
                               int64_t *step_num) {
    Py_ssize_t k = 0;
    *has_step = 0;
    while (p < end) {
        const uint8_t *body;
        size_t n;
        if (*p == 0x0a) {
            p = lenfield(p + 1, end, &body, &n);
            if (!p) return -2;
            if (k == s->items_cap) {
                size_t cap = (size_t)s->items_cap;
                void *items = s->items;
                if (grow_bytes(&items, &cap, (size_t)k + 1, sizeof(Item)) < 0) return -1;
                s->items = items;
                s->items_cap = (Py_ssize_t)cap;
            }
            if (!decode_item(body, body + n, &s->items[k], history)) return -2;
            k++;
        } else if (history && *p == 0x12) {  /* step: HistoryStep { num = 1 } */
            if (*has_step) return -2;       /* a second one would be merged: leave that to protobuf */
            p = lenfield(p + 1, end, &body, &n);
            if (!p) return -2;
            const uint8_t *q = body, *qe = body + n;
            int64_t num = 0;
            while (q < qe) {
                uint64_t v;
                if (*q != 0x08) return -2;
                q = varint(q + 1, qe, &v);
                if (!q) return -2;
                num = (int64_t)v;
            }
            *has_step = 1;
            *step_num = num;
        } else return -2;
    }
    return k;
}

enum { REC_SLOW = 0, REC_HISTORY = 1, REC_SUMMARY = 2 };

/* Decode one record. REC_HISTORY / REC_SUMMARY: taken in; REC_SLOW: not a shape this decoder knows
 * completely (nothing committed); -1: error set. `data` is the start of the file's buffer when the payload
 * lies in it (a FULL chunk), NULL when it lives in the scratch buffer. */
static int decode_record(Scanner *s, const uint8_t *p, const uint8_t *end, const uint8_t *data, int64_t offset,
                         int64_t *next_step, int *step_known) {
    const uint8_t *body = NULL, *body_end = NULL;
    int which = 0;
    while (p < end) {
        uint8_t k = *p;
        if (k == 0x08) {  /* num: an int64 the reader ignores */
            uint64_t v;
            p = varint(p + 1, end, &v);
        } else if (k == 0x12 || k == 0x1a) {  /* history = 2, summary = 3; once */
            size_t n;
            if (which) return REC_SLOW;
            which = k == 0x12 ? REC_HISTORY : REC_SUMMARY;
            p = lenfield(p + 1, end, &body, &n);
            body_end = body + n;
        } else return REC_SLOW;
        if (!p) return REC_SLOW;
    }
    if (!which) return REC_SLOW;
    int has_step = 0;
    int64_t step_num = 0;
    Py_ssize_t k = decode_items(s, body, body_end, which == REC_HISTORY, &has_step, &step_num);
    if (k == -1) return -1;
    if (k < 0) return REC_SLOW;
    if (which == REC_SUMMARY) {
        for (Py_ssize_t i = 0; i < k; i++)
            if (!utf8_ok(s->items[i].value, s->items[i].value_len)) return REC_SLOW;
        for (Py_ssize_t i = 0; i < k; i++) {
            Item *it = &s->items[i];
            it->id = key_id(s, i, it->key, it->key_len);
            if (it->id == -1) return -1;
            if (it->id == -2) return REC_SLOW;  /* nothing committed yet: ids only */
        }
        for (Py_ssize_t i = 0; i < k; i++) {
            Item *it = &s->items[i];
            int32_t id = it->id;
            if (s->sum_gen[id] != s->gen) {
                s->sum_gen[id] = s->gen;
                s->sum_order[s->n_sum++] = id;
            }
            s->sum_len[id] = (uint32_t)it->value_len;
            if (data) {
                s->sum_arena_flag[id] = 0;
                s->sum_off[id] = (int64_t)(it->value - data);
            } else {
                void *a = s->arena;
                if (grow_bytes(&a, &s->arena_cap, s->arena_n + it->value_len, 1) < 0) return -1;
                s->arena = a;
                memcpy(s->arena + s->arena_n, it->value, it->value_len);
                s->sum_arena_flag[id] = 1;
                s->sum_off[id] = (int64_t)s->arena_n;
                s->arena_n += it->value_len;
            }
        }
        return REC_SUMMARY;
    }
    /* history: find _step and _timestamp, parse every value, and only then commit the rows */
    int64_t step = 0;
    int have_step = 0, have_wall = 0;
    double wall = 0;
    if (rows_reserve(s, k) < 0) return -1;
    Py_ssize_t first = s->n, m = first;
    for (Py_ssize_t i = 0; i < k; i++) {
        Item *it = &s->items[i];
        if (it->key_len == 5 && memcmp(it->key, "_step", 5) == 0) {
            if (have_step || !parse_step(it->value, it->value_len, &step)) return REC_SLOW;
            have_step = 1;
            continue;
        }
        if (it->key_len == 10 && memcmp(it->key, "_timestamp", 10) == 0) {
            if (have_wall || !parse_number(it->value, it->value_len, NUM_FLOAT_OF_TEXT, &wall)) return REC_SLOW;
            have_wall = 1;
            continue;
        }
        double v;
        if (!parse_number(it->value, it->value_len, NUM_VALUE, &v)) return REC_SLOW;
        int32_t id = key_id(s, i, it->key, it->key_len);
        if (id == -1) return -1;
        if (id == -2) return REC_SLOW;
        s->value[m] = v;
        s->tag[m] = id;
        m++;
    }
    if (!have_step) {
        if (has_step) step = step_num;
        else if (*step_known) step = *next_step;
        else return REC_SLOW;
    }
    if (step == INT64_MAX) return REC_SLOW;  /* its next step would not fit int64 */
    *next_step = step + 1;
    *step_known = 1;
    for (Py_ssize_t i = first; i < m; i++) {
        s->position[i] = offset;
        s->step[i] = step;
        s->wall_time[i] = have_wall ? wall : 0.0;
        s->has_wall[i] = (uint8_t)have_wall;
    }
    s->n = m;
    return REC_HISTORY;
}

/* ---------------------------------------------------------------- the walk */

/* Issue codes; ingest/wandb.py words them exactly as its Python walk `_log_records` does. */
enum { ISSUE_TRUNCATED = 0, ISSUE_ZEROED = 1, ISSUE_OVERFLOW = 2, ISSUE_CRC = 3, ISSUE_UNFINISHED = 4,
       ISSUE_ORPHAN = 5 };
enum { WHY_END = 0, WHY_SLOW = 1, WHY_FULL = 2 };

static int add_issue(PyObject *issues, int code, long long a, long long b, long long c, long long d) {
    PyObject *t = Py_BuildValue("(iLLLL)", code, a, b, c, d);
    if (!t) return -1;
    int r = PyList_Append(issues, t);
    Py_DECREF(t);
    return r;
}

static int scratch_add(Scanner *s, const uint8_t *p, size_t n) {
    void *q = s->scratch;
    if (grow_bytes(&q, &s->scratch_cap, s->scratch_n + n, 1) < 0) return -1;
    s->scratch = q;
    memcpy(s->scratch + s->scratch_n, p, n);
    s->scratch_n += n;
    return 0;
}

PyDoc_STRVAR(scan_doc,
"scan(data, pos, next_step, limit) -> (why, pos, next_step, fast_end, n_summaries, issues, summary, slow)\n\n"
"Walk the log in `data` (the whole file) from byte `pos` (a record boundary, >= 7), taking in every history\n"
"and summary record of the fast shapes, until the file ends (why 0), a record of another shape is met\n"
"(why 1: `slow` = (offset, end, payload bytes), `pos` = its end), or the rows held reach `limit` (why 2,\n"
"after that record). `next_step` is the step W&B gives a row that names none; the new one comes back.\n"
"`fast_end` is the end of the last record taken in (-1: none), `n_summaries` how many summary records were.\n"
"`issues` holds (code, a, b, c, d) framing issues in file order; `summary` the summary updates of this call\n"
"as (key id, value_json str), one per key with its latest value, in order of first update. Rows accumulate\n"
"until `take()`; keys (ids into `keys()`) for the scanner's life.");

static PyObject *Scanner_scan(Scanner *s, PyObject *args) {
    Py_buffer view;
    Py_ssize_t pos;
    PyObject *next_obj;
    Py_ssize_t limit;
    if (!PyArg_ParseTuple(args, "y*nOn", &view, &pos, &next_obj, &limit)) return NULL;
    /* A next step beyond int64 (a writer's absurd `_step`): rows that would need it go to Python. */
    int overflow = 0;
    long long next_step = PyLong_AsLongLongAndOverflow(next_obj, &overflow);
    if (next_step == -1 && PyErr_Occurred()) { PyBuffer_Release(&view); return NULL; }
    int step_known = !overflow;
    const uint8_t *data = view.buf;
    Py_ssize_t n = view.len;
    PyObject *issues = PyList_New(0), *summary = NULL, *slow = NULL, *result = NULL;
    if (!issues) goto done;
    s->gen++;
    if (s->gen == 0) {  /* wrapped: clear the generations so no stale key looks current */
        memset(s->sum_gen, 0, (size_t)s->sum_cap * sizeof(uint32_t));
        s->gen = 1;
    }
    s->n_sum = 0;
    s->arena_n = 0;
    int why = WHY_END, in_rec = 0, recovering = 0;
    long long rec_start = -1, fast_end = -1, n_summaries = 0;
    int64_t step = next_step;
    if (pos < HEADER) pos = HEADER;
    s->scratch_n = 0;

#define RESYNC(code, length, typ) do { \
        if (add_issue(issues, code, pos, in_rec ? rec_start : -1, length, typ) < 0) goto done; \
        in_rec = 0; s->scratch_n = 0; recovering = 1; pos = (pos / BLOCK + 1) * BLOCK; } while (0)
#define TRUNCATED() do { \
        if (add_issue(issues, ISSUE_TRUNCATED, in_rec ? rec_start : pos, 0, 0, 0) < 0) goto done; } while (0)

    while (1) {
        Py_ssize_t left = BLOCK - pos % BLOCK;
        if (left < HEADER) { pos += left; continue; }
        if (pos + HEADER > n) {
            if (pos < n || in_rec) TRUNCATED();
            break;
        }
        const uint8_t *h = data + pos;
        uint32_t crc = rd32(h);
        uint32_t length = rd16(h + 4);
        uint8_t typ = h[6];
        if (crc == 0 && length == 0 && typ == 0) {  /* zeroed rest of block */
            if (in_rec) RESYNC(ISSUE_ZEROED, 0, 0);
            else pos += left;
            continue;
        }
        Py_ssize_t end = pos + HEADER + length;
        if ((Py_ssize_t)length > left - HEADER) {
            if (end > n && pos + left >= n) { TRUNCATED(); break; }
            RESYNC(ISSUE_OVERFLOW, length, typ);
            continue;
        }
        if (end > n) { TRUNCATED(); break; }
        const uint8_t *payload = h + HEADER;
        if (typ > LAST || !chunk_crc_ok(crc, typ, payload, length)) {
            RESYNC(ISSUE_CRC, length, typ);
            continue;
        }
        const uint8_t *rec = NULL, *rec_end = NULL;
        long long offset = 0;
        int contiguous = 0;
        if (typ == FULL || typ == FIRST) {
            if (in_rec) {
                if (add_issue(issues, ISSUE_UNFINISHED, rec_start, pos, 0, 0) < 0) goto done;
                in_rec = 0;
                s->scratch_n = 0;
            }
            recovering = 0;
            if (typ == FULL) {
                rec = payload;
                rec_end = payload + length;
                offset = pos;
                contiguous = 1;
            } else {
                if (scratch_add(s, payload, length) < 0) goto done;
                in_rec = 1;
                rec_start = pos;
            }
        } else if (!in_rec) {
            if (!recovering)
                if (add_issue(issues, ISSUE_ORPHAN, pos, 0, 0, 0) < 0) goto done;
        } else if (typ == MIDDLE) {
            if (scratch_add(s, payload, length) < 0) goto done;
        } else {  /* LAST (and type 0, which the Python walk also takes as the end of a record) */
            if (scratch_add(s, payload, length) < 0) goto done;
            rec = s->scratch;
            rec_end = s->scratch + s->scratch_n;
            offset = rec_start;
            in_rec = 0;
        }
        pos = end;
        if (!rec) continue;
        int r = decode_record(s, rec, rec_end, contiguous ? data : NULL, offset, &step, &step_known);
        if (r < 0) goto done;
        if (r == REC_SLOW) {
            PyObject *payload_obj = PyBytes_FromStringAndSize((const char *)rec, rec_end - rec);
            if (!payload_obj) goto done;
            slow = Py_BuildValue("(LnN)", offset, end, payload_obj);
            if (!slow) goto done;
            s->scratch_n = 0;
            why = WHY_SLOW;
            break;
        }
        s->scratch_n = 0;
        fast_end = end;
        if (r == REC_SUMMARY) n_summaries++;
        else if (s->n >= limit) { why = WHY_FULL; break; }
    }
#undef RESYNC
#undef TRUNCATED
    summary = PyList_New(s->n_sum);
    if (!summary) goto done;
    for (Py_ssize_t i = 0; i < s->n_sum; i++) {
        int32_t id = s->sum_order[i];
        const char *v = s->sum_arena_flag[id] ? s->arena + s->sum_off[id] : (const char *)data + s->sum_off[id];
        PyObject *t = Py_BuildValue("(is#)", id, v, (Py_ssize_t)s->sum_len[id]);
        if (!t) goto done;
        PyList_SET_ITEM(summary, i, t);
    }
    PyObject *step_obj = step_known ? PyLong_FromLongLong(step) : Py_NewRef(next_obj);
    if (!step_obj) goto done;
    result = Py_BuildValue("(inNLLOOO)", why, pos, step_obj, fast_end, n_summaries, issues, summary,
                           slow ? slow : Py_None);
done:
    PyBuffer_Release(&view);
    Py_XDECREF(issues);
    Py_XDECREF(summary);
    Py_XDECREF(slow);
    return result;
}

PyDoc_STRVAR(take_doc,
"take() -> (positions, steps, wall_times, has_wall, values, tag_ids)\n\n"
"The rows held since the last take as packed bytes (int64, int64, float64, uint8, float64, int32 key ids);\n"
"the scanner then holds none.");

static PyObject *Scanner_take(Scanner *s, PyObject *noargs) {
    Py_ssize_t n = s->n;
    PyObject *r = Py_BuildValue("(y#y#y#y#y#y#)", (const char *)s->position, n * 8, (const char *)s->step, n * 8,
                                (const char *)s->wall_time, n * 8, (const char *)s->has_wall, n,
                                (const char *)s->value, n * 8, (const char *)s->tag, n * 4);
    if (!r) return NULL;
    s->n = 0;
    return r;
}

static PyObject *Scanner_keys(Scanner *s, PyObject *args) {
    Py_ssize_t from;
    if (!PyArg_ParseTuple(args, "n", &from)) return NULL;
    return PyList_GetSlice(s->keys, from, PyList_GET_SIZE(s->keys));
}

static PyObject *Scanner_held(Scanner *s, PyObject *noargs) { return PyLong_FromSsize_t(s->n); }

static int Scanner_init(Scanner *s, PyObject *args, PyObject *kw) {
    if (!PyArg_ParseTuple(args, "")) return -1;
    s->keys = PyList_New(0);
    if (wire_table_init(&s->table) < 0 || !s->keys) { PyErr_NoMemory(); return -1; }
    return 0;
}

static void Scanner_dealloc(Scanner *s) {
    if (s->table.slots)
        for (uint32_t i = 0; i <= s->table.mask; i++) free((void *)s->table.slots[i].ptr);
    free(s->table.slots);
    Py_XDECREF(s->keys);
    free(s->position); free(s->step); free(s->wall_time); free(s->value); free(s->tag); free(s->has_wall);
    free(s->sum_gen); free(s->sum_off); free(s->sum_len); free(s->sum_arena_flag); free(s->sum_order);
    free(s->arena); free(s->scratch); free(s->items); free(s->guess); free(s->key_ptr); free(s->key_len);
    Py_TYPE(s)->tp_free((PyObject *)s);
}

static PyMethodDef scanner_methods[] = {
    {"scan", (PyCFunction)Scanner_scan, METH_VARARGS, scan_doc},
    {"take", (PyCFunction)Scanner_take, METH_NOARGS, take_doc},
    {"keys", (PyCFunction)Scanner_keys, METH_VARARGS, "keys(from) -> the interned keys (UTF-8 bytes) from id `from` on."},
    {"held", (PyCFunction)Scanner_held, METH_NOARGS, "How many rows are held (taken in since the last take)."},
    {NULL, NULL, 0, NULL},
};

static PyTypeObject ScannerType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "ingest._wandblog.Scanner",
    .tp_basicsize = sizeof(Scanner),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "One read of a .wandb log: rows and interned keys accumulate across scan() calls until take().",
    .tp_new = PyType_GenericNew,
    .tp_init = (initproc)Scanner_init,
    .tp_dealloc = (destructor)Scanner_dealloc,
    .tp_methods = scanner_methods,
};

PyDoc_STRVAR(number_doc,
"parse_number(text: bytes, float_of_text: bool = False) -> float | None\n\n"
"What the core makes of a value_json: float(json.loads(text)) (or float(text) with float_of_text) when\n"
"`text` is a plain JSON number or NaN / Infinity / -Infinity, else None (such a record goes to Python).");

static PyObject *py_parse_number(PyObject *self, PyObject *args) {
    Py_buffer view;
    int text = 0;
    if (!PyArg_ParseTuple(args, "y*|p", &view, &text)) return NULL;
    double v;
    int ok = parse_number(view.buf, (size_t)view.len, text ? NUM_FLOAT_OF_TEXT : NUM_VALUE, &v);
    PyBuffer_Release(&view);
    if (!ok) Py_RETURN_NONE;
    return PyFloat_FromDouble(v);
}

static PyMethodDef methods[] = {
    {"parse_number", py_parse_number, METH_VARARGS, number_doc},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "ingest._wandblog",
    "Compiled core of the W&B reader: the .wandb block framing, CRC-32 and the common history / summary records.",
    -1, methods,
};

PyMODINIT_FUNC PyInit__wandblog(void) {
    crc_init();
    if (PyType_Ready(&ScannerType) < 0) return NULL;
    PyObject *m = PyModule_Create(&module);
    if (!m) return NULL;
    Py_INCREF(&ScannerType);
    if (PyModule_AddObject(m, "Scanner", (PyObject *)&ScannerType) < 0) {
        Py_DECREF(&ScannerType);
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
