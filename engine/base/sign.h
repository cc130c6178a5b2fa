/* sign: the engine's Ed25519 signing key (OpenSSL), which seals audit
 * exports. Made at first use in a directory of its own (0700), the private
 * key readable only by the user the engine runs as (0600, written to a
 * temporary name and linked into place, so two first uses at once keep one
 * key); the public key beside it as PEM, for anyone who checks an export. */
#ifndef ENGINE_SIGN_H
#define ENGINE_SIGN_H
#include <stddef.h>

#define SIGN_PUBLIC_BYTES 32
#define SIGN_SIGNATURE_BYTES 64

typedef struct sign_key sign_key;

/* The key in dir (audit-ed25519.pem), made there with dir when missing:
 * 0 with *out, or -1 with err (a key another user owns or others can read is
 * refused, naming the file). */
int sign_key_open(const char *dir, sign_key **out, char *err, size_t errlen);
void sign_key_free(sign_key *k);
/* The public key: raw bytes, and the path of its PEM file. */
void sign_key_public(const sign_key *k, unsigned char pub[SIGN_PUBLIC_BYTES]);
const char *sign_key_public_path(const sign_key *k);
/* Signs msg: 0, or -1 (OpenSSL failed). */
int sign_key_sign(const sign_key *k, const void *msg, size_t len, unsigned char sig[SIGN_SIGNATURE_BYTES]);

/* Whether sig is pub's signature of msg: 1 yes, 0 no. */
int sign_verify(const unsigned char pub[SIGN_PUBLIC_BYTES], const void *msg, size_t len,
                const unsigned char sig[SIGN_SIGNATURE_BYTES]);
/* Reads an Ed25519 public key from a PEM file (what sign_key_open writes, or
 * `openssl pkey -pubout`), or 64 hex digits: 0, or -1 with err. */
int sign_public_read(const char *path, unsigned char pub[SIGN_PUBLIC_BYTES], char *err, size_t errlen);
#endif
