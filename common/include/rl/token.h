#ifndef RL_TOKEN_H
#define RL_TOKEN_H

#include <stddef.h>

/* Secrets the console hands out: sign-in tokens (`runledger users add`)
 * and session ids (common/src/token.c). Both are RL_TOKEN_BYTES random
 * bytes from OpenSSL's CSPRNG, written as lowercase hex; the ledger keeps
 * only their SHA-256 (rl_sha256_hex). */

#define RL_TOKEN_BYTES 32
/* RL_TOKEN_BYTES as hex, plus the NUL. */
#define RL_TOKEN_HEX_SIZE (2 * RL_TOKEN_BYTES + 1)

/* Fills hex (RL_TOKEN_HEX_SIZE bytes) with RL_TOKEN_BYTES random bytes as
 * hex. Returns 0, or RL_ERR_IO when the CSPRNG fails (hex is then ""). */
int rl_token_new(char *hex);

/* 1 when a and b, both NUL-terminated, hold the same bytes, compared in
 * time that depends on their lengths only (CRYPTO_memcmp). */
int rl_token_equal(const char *a, const char *b);

#endif /* RL_TOKEN_H */
