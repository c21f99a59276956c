#ifndef RL_ERR_H
#define RL_ERR_H

#include <stddef.h>

/* Return codes shared by every module: 0 is success, failures are negative.
 * A function that fails also fills the caller's errstr with a lowercase
 * message that says what failed and why. */
enum rl_err {
    RL_OK = 0,
    RL_ERR_INVALID = -1,  /* bad input: the caller must not retry as is */
    RL_ERR_NOMEM = -2,    /* allocation failed */
    RL_ERR_IO = -3,       /* file or socket error */
    RL_ERR_DB = -4,       /* PostgreSQL error; may be transient */
    RL_ERR_CONFLICT = -5, /* same run id, different request fingerprint */
    RL_ERR_STALE = -6,    /* the caller's lease (owner, epoch) is gone */
    RL_ERR_NOTFOUND = -7, /* no such run or row */
    RL_ERR_KAFKA = -8,    /* librdkafka error */
    RL_ERR_HTTP = -9,     /* model endpoint or transport error */
    RL_ERR_CHECKSUM = -10 /* an applied migration was changed */
};

/* Writes a printf-formatted message into the caller's errstr (of
 * errstr_size bytes), truncating; does nothing when errstr is NULL or
 * errstr_size is 0. */
void rl_set_err(char *errstr, size_t errstr_size, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

#endif /* RL_ERR_H */
