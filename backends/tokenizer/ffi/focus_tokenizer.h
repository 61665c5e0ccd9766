/*
 * focus_tokenizer.h: the C API of the focus_tokenizer crate (src/lib.rs), used only by
 * backends/tokenizer through cgo.
 *
 * Every text and id array crosses as pointer + length in both directions, so a NUL byte is
 * ordinary data. Input pointers may be NULL when their length is 0. Outputs are allocated
 * by Rust and released with the free function of their kind: ftk_bytes_free for text and
 * error messages, ftk_ids_free for id arrays, ftk_tokenizer_free for a tokenizer. A failing
 * call returns non-zero (or NULL for ftk_tokenizer_load) and sets *err / *err_len to a
 * UTF-8 message; it writes no other output. A Rust panic is caught and reported the same
 * way. A loaded tokenizer is immutable and safe to use from several threads at once.
 */
#ifndef FOCUS_TOKENIZER_H
#define FOCUS_TOKENIZER_H

#include <stddef.h>
#include <stdint.h>

typedef struct ftk_tokenizer ftk_tokenizer;

/* Parses tokenizer.json content (len bytes). NULL on error. */
ftk_tokenizer *ftk_tokenizer_load(const uint8_t *json, size_t len, uint8_t **err, size_t *err_len);
void ftk_tokenizer_free(ftk_tokenizer *tk);

/* Number of ids, added tokens included. */
size_t ftk_vocab_size(const ftk_tokenizer *tk);

/* Encodes len bytes of UTF-8 text; *ids (NULL when *n is 0) is freed with ftk_ids_free. */
int32_t ftk_encode(const ftk_tokenizer *tk, const uint8_t *text, size_t len, int32_t add_special,
                   uint32_t **ids, size_t *n, uint8_t **err, size_t *err_len);

/* Decodes n ids; *out (NULL when *out_len is 0) is freed with ftk_bytes_free. */
int32_t ftk_decode(const ftk_tokenizer *tk, const uint32_t *ids, size_t n, int32_t skip_special,
                   uint8_t **out, size_t *out_len, uint8_t **err, size_t *err_len);

void ftk_ids_free(uint32_t *ids, size_t n);
void ftk_bytes_free(uint8_t *p, size_t n);

#endif /* FOCUS_TOKENIZER_H */
