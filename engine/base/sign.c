/* sign: the engine's Ed25519 key (sign.h), through OpenSSL's EVP. */
#include "sign.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "util.h"

struct sign_key {
  EVP_PKEY *pkey;
  unsigned char pub[SIGN_PUBLIC_BYTES];
  char pub_path[PATH_MAX];
};

#define KEY_FILE "audit-ed25519.pem"
#define PUB_FILE "audit-ed25519.pub.pem"

/* Writes the PEM of pkey (private, or public when !private_key) to path
 * through a temporary file linked into place: 0; 1 when path exists already
 * (the other writer's stays); -1 with err. */
static int write_pem(EVP_PKEY *pkey, int private_key, const char *path, char *err, size_t errlen) {
  char *tmp = util_fmt("%s.%ld.tmp", path, (long)getpid());
  int fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, private_key ? 0600 : 0644);
  FILE *f = fd >= 0 ? fdopen(fd, "w") : NULL;
  int ok = f && (private_key ? PEM_write_PrivateKey(f, pkey, NULL, NULL, 0, NULL, NULL)
                             : PEM_write_PUBKEY(f, pkey)) == 1;
  if (f) ok = fflush(f) == 0 && fsync(fileno(f)) == 0 && ok, fclose(f);
  else if (fd >= 0) close(fd);
  int rc = -1;
  if (!ok) util_seterr(err, errlen, "cannot write %s: %s", tmp, strerror(errno ? errno : EIO));
  else if (link(tmp, path) == 0) rc = 0;
  else if (errno == EEXIST) rc = 1;
  else util_seterr(err, errlen, "cannot create %s: %s", path, strerror(errno));
  unlink(tmp);
  free(tmp);
  return rc;
}

static EVP_PKEY *read_pem(const char *path, int private_key, char *err, size_t errlen) {
  FILE *f = fopen(path, "r");
  if (!f) return util_seterr(err, errlen, "cannot read %s: %s", path, strerror(errno)), NULL;
  EVP_PKEY *k = private_key ? PEM_read_PrivateKey(f, NULL, NULL, NULL) : PEM_read_PUBKEY(f, NULL, NULL, NULL);
  fclose(f);
  if (k && EVP_PKEY_get_id(k) != EVP_PKEY_ED25519) EVP_PKEY_free(k), k = NULL;
  if (!k) util_seterr(err, errlen, "%s is not an Ed25519 %s key in PEM", path, private_key ? "private" : "public");
  return k;
}

int sign_key_open(const char *dir, sign_key **out, char *err, size_t errlen) {
  *out = NULL;
  if (mkdir(dir, 0700) != 0 && errno != EEXIST)
    return util_seterr(err, errlen, "cannot create %s: %s", dir, strerror(errno)), -1;
  char path[PATH_MAX];
  snprintf(path, sizeof path, "%s/" KEY_FILE, dir);
  struct stat st;
  if (stat(path, &st) != 0) {
    if (errno != ENOENT) return util_seterr(err, errlen, "cannot read %s: %s", path, strerror(errno)), -1;
    EVP_PKEY *fresh = EVP_PKEY_Q_keygen(NULL, NULL, "ED25519");
    if (!fresh) return util_seterr(err, errlen, "cannot make an Ed25519 key (OpenSSL)"), -1;
    int rc = write_pem(fresh, 1, path, err, errlen);
    EVP_PKEY_free(fresh);
    if (rc < 0) return -1;
    if (stat(path, &st) != 0) return util_seterr(err, errlen, "cannot read %s: %s", path, strerror(errno)), -1;
  }
  /* a key someone else could read, or replace, signs nothing */
  if (st.st_uid != geteuid())
    return util_seterr(err, errlen, "%s belongs to user %ld, not to this one (%ld): run as the engine's user",
                       path, (long)st.st_uid, (long)geteuid()), -1;
  if (st.st_mode & 077)
    return util_seterr(err, errlen, "%s can be read by others (mode %03o): it must be 0600", path,
                       (unsigned)(st.st_mode & 0777)), -1;
  EVP_PKEY *pkey = read_pem(path, 1, err, errlen);
  if (!pkey) return -1;
  sign_key *k = util_xcalloc(1, sizeof *k);
  k->pkey = pkey;
  size_t n = sizeof k->pub;
  if (EVP_PKEY_get_raw_public_key(pkey, k->pub, &n) != 1 || n != sizeof k->pub) {
    sign_key_free(k);
    return util_seterr(err, errlen, "%s: cannot read its public key", path), -1;
  }
  snprintf(k->pub_path, sizeof k->pub_path, "%s/" PUB_FILE, dir);
  if (access(k->pub_path, F_OK) != 0 && write_pem(pkey, 0, k->pub_path, err, errlen) < 0) {
    sign_key_free(k);
    return -1;
  }
  *out = k;
  return 0;
}

void sign_key_free(sign_key *k) {
  if (!k) return;
  EVP_PKEY_free(k->pkey);
  free(k);
}

void sign_key_public(const sign_key *k, unsigned char pub[SIGN_PUBLIC_BYTES]) {
  memcpy(pub, k->pub, SIGN_PUBLIC_BYTES);
}

const char *sign_key_public_path(const sign_key *k) { return k->pub_path; }

int sign_key_sign(const sign_key *k, const void *msg, size_t len, unsigned char sig[SIGN_SIGNATURE_BYTES]) {
  EVP_MD_CTX *c = EVP_MD_CTX_new();
  size_t n = SIGN_SIGNATURE_BYTES;
  int ok = c && EVP_DigestSignInit(c, NULL, NULL, NULL, k->pkey) == 1 &&
           EVP_DigestSign(c, sig, &n, msg, len) == 1 && n == SIGN_SIGNATURE_BYTES;
  EVP_MD_CTX_free(c);
  return ok ? 0 : -1;
}

int sign_verify(const unsigned char pub[SIGN_PUBLIC_BYTES], const void *msg, size_t len,
                const unsigned char sig[SIGN_SIGNATURE_BYTES]) {
  EVP_PKEY *p = EVP_PKEY_new_raw_public_key(EVP_PKEY_ED25519, NULL, pub, SIGN_PUBLIC_BYTES);
  EVP_MD_CTX *c = EVP_MD_CTX_new();
  int ok = p && c && EVP_DigestVerifyInit(c, NULL, NULL, NULL, p) == 1 &&
           EVP_DigestVerify(c, sig, SIGN_SIGNATURE_BYTES, msg, len) == 1;
  EVP_MD_CTX_free(c);
  EVP_PKEY_free(p);
  return ok;
}

int sign_public_read(const char *path, unsigned char pub[SIGN_PUBLIC_BYTES], char *err, size_t errlen) {
  size_t len;
  char *text = util_read_file(path, &len);
  if (!text) return util_seterr(err, errlen, "cannot read %s: %s", path, strerror(errno)), -1;
  char *s = text;
  while (len && (s[len - 1] == '\n' || s[len - 1] == '\r' || s[len - 1] == ' ')) s[--len] = 0;
  int is_hex = len == 2 * SIGN_PUBLIC_BYTES && util_unhex(s, pub, SIGN_PUBLIC_BYTES) == 0;
  free(text);
  if (is_hex) return 0;
  EVP_PKEY *k = read_pem(path, 0, err, errlen);
  if (!k) return -1;
  size_t n = SIGN_PUBLIC_BYTES;
  int ok = EVP_PKEY_get_raw_public_key(k, pub, &n) == 1 && n == SIGN_PUBLIC_BYTES;
  EVP_PKEY_free(k);
  if (!ok) util_seterr(err, errlen, "%s: cannot read its Ed25519 public key", path);
  return ok ? 0 : -1;
}
