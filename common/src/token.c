/* token.c: random secrets and their constant-time comparison
 * (rl/token.h). */
#include "rl/token.h"

#include <openssl/crypto.h>
#include <openssl/rand.h>
#include <string.h>

#include "rl/err.h"

int
rl_token_new(char *hex)
{
    static const char digits[] = "0123456789abcdef";
    unsigned char raw[RL_TOKEN_BYTES];

    hex[0] = '\0';
    if (RAND_bytes(raw, sizeof(raw)) != 1)
        return RL_ERR_IO;
    for (size_t i = 0; i < sizeof(raw); i++) {
        hex[2 * i] = digits[raw[i] >> 4];
        hex[2 * i + 1] = digits[raw[i] & 0x0f];
    }
    hex[2 * sizeof(raw)] = '\0';
    OPENSSL_cleanse(raw, sizeof(raw));
    return 0;
}

int
rl_token_equal(const char *a, const char *b)
{
    size_t len = strlen(a);

    if (len != strlen(b))
        return 0;
    return CRYPTO_memcmp(a, b, len) == 0;
}
