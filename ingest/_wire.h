/* The wire-level pieces both compiled cores share (ingest/_tfevents.c, ingest/_wandblog.c): CRC-32C, protobuf
 * varints, little-endian loads and a table that interns byte strings. One copy, so the two readers cannot
 * drift apart (they had: an over-long varint was rejected by one and accepted by the other).
 *
 * Each extension is one .c file that includes this header, so everything here is static.
 */
#ifndef INGEST_WIRE_H
#define INGEST_WIRE_H

#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#if defined(__x86_64__) || defined(__i386__)
#include <nmmintrin.h>
#define WIRE_HAVE_X86_CRC 1
#endif

/* ---------------------------------------------------------------- CRC-32C (Castagnoli), hardware or table */

static uint32_t wire_crc_table[8][256];
static int wire_have_hw_crc = 0;

/* Call once, when the module is initialised. */
static void wire_init(void) {
    for (uint32_t i = 0; i < 256; i++) {
        uint32_t c = i;
        for (int k = 0; k < 8; k++) c = (c & 1) ? (c >> 1) ^ 0x82F63B78u : c >> 1;
        wire_crc_table[0][i] = c;
    }
    for (uint32_t i = 0; i < 256; i++)
        for (int t = 1; t < 8; t++)
            wire_crc_table[t][i] = (wire_crc_table[t - 1][i] >> 8) ^ wire_crc_table[0][wire_crc_table[t - 1][i] & 0xff];
#ifdef WIRE_HAVE_X86_CRC
    __builtin_cpu_init();
    wire_have_hw_crc = __builtin_cpu_supports("sse4.2");
#endif
}

/* The running (pre-inverted) CRC state `c` extended by p[0:n], slicing-by-8. */
static uint32_t wire_crc_sw(uint32_t c, const uint8_t *p, size_t n) {
    while (n >= 8) {
        uint64_t w;
        memcpy(&w, p, 8);
        w ^= c;
        c = wire_crc_table[7][w & 0xff] ^ wire_crc_table[6][(w >> 8) & 0xff] ^ wire_crc_table[5][(w >> 16) & 0xff] ^
            wire_crc_table[4][(w >> 24) & 0xff] ^ wire_crc_table[3][(w >> 32) & 0xff] ^
            wire_crc_table[2][(w >> 40) & 0xff] ^ wire_crc_table[1][(w >> 48) & 0xff] ^ wire_crc_table[0][w >> 56];
        p += 8;
        n -= 8;
    }
    while (n--) c = (c >> 8) ^ wire_crc_table[0][(c ^ *p++) & 0xff];
    return c;
}

#ifdef WIRE_HAVE_X86_CRC
__attribute__((target("sse4.2"))) static uint32_t wire_crc_hw(uint32_t c32, const uint8_t *p, size_t n) {
    uint64_t c = c32;
    while (n >= 8) {
        uint64_t w;
        memcpy(&w, p, 8);
        c = _mm_crc32_u64(c, w);
        p += 8;
        n -= 8;
    }
    c32 = (uint32_t)c;
    while (n--) c32 = _mm_crc32_u8(c32, *p++);
    return c32;
}
#endif

/* CRC-32C of the bytes whose CRC-32C is `crc`, followed by p[0:n] (crc = 0: of p[0:n] alone). */
static inline uint32_t wire_crc32c_extend(uint32_t crc, const uint8_t *p, size_t n) {
    uint32_t c = ~crc;
#ifdef WIRE_HAVE_X86_CRC
    if (wire_have_hw_crc) return ~wire_crc_hw(c, p, n);
#endif
    return ~wire_crc_sw(c, p, n);
}

static inline uint32_t wire_crc32c(const uint8_t *p, size_t n) { return wire_crc32c_extend(0, p, n); }

/* The masked CRC of TFRecord and LevelDB logs: rotate right by 15 and add a constant. */
static inline uint32_t wire_mask(uint32_t c) { return ((c >> 15) | (c << 17)) + 0xA282EAD8u; }

/* ---------------------------------------------------------------- little-endian loads */

static inline uint16_t wire_rd16(const uint8_t *p) { uint16_t v; memcpy(&v, p, 2); return v; }
static inline uint32_t wire_rd32(const uint8_t *p) { uint32_t v; memcpy(&v, p, 4); return v; }
static inline uint64_t wire_rd64(const uint8_t *p) { uint64_t v; memcpy(&v, p, 8); return v; }

/* ---------------------------------------------------------------- protobuf varints */

/* A varint as protobuf's parser (upb, protobuf >= 4.21) reads it: at most 10 bytes, and the bits of a 10th
 * byte past the 64th are dropped (checked against protobuf 7.36: a 10th byte of 0x02 or 0x7F parses, as the
 * value the first bits give). Returns the pointer past it; NULL when it runs past `end` or has an 11th byte. */
static inline const uint8_t *wire_varint(const uint8_t *p, const uint8_t *end, uint64_t *out) {
    if (p < end && *p < 0x80) { *out = *p; return p + 1; }
    uint64_t v = 0;
    for (int shift = 0; shift < 70 && p < end; shift += 7) {
        uint8_t b = *p++;
        v |= (uint64_t)(b & 0x7f) << shift;
        if (!(b & 0x80)) { *out = v; return p; }
    }
    return NULL;
}

/* ---------------------------------------------------------------- interning: bytes -> dense id */

typedef struct {
    const uint8_t *ptr; /* the key's bytes (NULL: empty slot; never NULL for a used one, even of length 0) */
    uint32_t len, hash;
    int32_t id;
} WireSlot;

typedef struct {
    WireSlot *slots;
    uint32_t mask; /* slots - 1, a power of two minus one */
    int32_t n;     /* keys held; ids are 0 .. n-1 in the order keys were added */
} WireTable;

/* 0, or -1 when out of memory (no Python error set). */
static int wire_table_init(WireTable *t) {
    t->mask = 1023;
    t->n = 0;
    t->slots = calloc(t->mask + 1, sizeof(WireSlot));
    return t->slots ? 0 : -1;
}

static inline uint32_t wire_hash(const uint8_t *p, size_t n) { return wire_crc32c(p, n); }

/* The slot holding key p[0:len] (its `ptr` set), or the empty slot where it belongs (its `ptr` NULL). */
static inline WireSlot *wire_table_find(WireTable *t, const uint8_t *p, uint32_t len, uint32_t hash) {
    uint32_t j = hash & t->mask;
    while (t->slots[j].ptr) {
        WireSlot *e = &t->slots[j];
        if (e->hash == hash && e->len == len && memcmp(e->ptr, p, len) == 0) return e;
        j = (j + 1) & t->mask;
    }
    return &t->slots[j];
}

static int wire_table_grow(WireTable *t) {
    uint32_t size = (t->mask + 1) * 2;
    WireSlot *s = calloc(size, sizeof(WireSlot));
    if (!s) return -1;
    for (uint32_t i = 0; i <= t->mask; i++) {
        if (!t->slots[i].ptr) continue;
        uint32_t j = t->slots[i].hash & (size - 1);
        while (s[j].ptr) j = (j + 1) & (size - 1);
        s[j] = t->slots[i];
    }
    free(t->slots);
    t->slots = s;
    t->mask = size - 1;
    return 0;
}

/* Put key `ptr` (storage the caller keeps alive, non-NULL) into `slot`, an empty slot `wire_table_find` gave
 * for it; the table grows when half full. Returns the new id, or -1 when out of memory (no Python error set). */
static int32_t wire_table_add(WireTable *t, WireSlot *slot, const uint8_t *ptr, uint32_t len, uint32_t hash) {
    slot->ptr = ptr;
    slot->len = len;
    slot->hash = hash;
    int32_t id = slot->id = t->n++;
    if ((uint32_t)t->n * 2 > t->mask && wire_table_grow(t) < 0) return -1;
    return id;
}

#endif /* INGEST_WIRE_H */
