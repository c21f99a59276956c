/* rl_stream_produce BOOTSTRAP TOPIC [LINGER_MS]: produces each line of
 * stdin, `key<TAB>value`, as one message the moment the line is complete.
 *
 * The paced scenarios of make bench (paced, trickle, soak, fairness) feed
 * their events through a pipe at a set rate and time them from when they
 * were written. `kcat -P` reads a pipe in blocks and produces a block's
 * lines only once the block is full, so 50 events a second of ~1 kB
 * reached the broker in clumps of four, and one a second arrived every
 * four seconds: the rate the service saw was not the rate offered. This
 * reads with read(2) and hands every complete line to librdkafka at once
 * (its linger, default 5 ms, still batches what arrives together). At end
 * of input it waits for every delivery (up to 60 s); exit status 1 when
 * any message was not delivered, 2 on bad usage. */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <librdkafka/rdkafka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static long failed;

static void
on_delivery(rd_kafka_t *rk, const rd_kafka_message_t *m, void *opaque)
{
    (void)rk;
    (void)opaque;
    if (m->err) {
        failed++;
        fprintf(stderr, "rl_stream_produce: delivery failed: %s\n",
                rd_kafka_err2str(m->err));
    }
}

static int
produce_line(rd_kafka_t *rk, const char *topic, char *line, size_t len)
{
    char *tab = memchr(line, '\t', len);
    const char *key = NULL;
    size_t key_len = 0;
    char *value = line;
    size_t value_len = len;
    rd_kafka_resp_err_t err;

    if (len == 0)
        return 0;
    if (tab) {
        key = line;
        key_len = (size_t)(tab - line);
        value = tab + 1;
        value_len = len - key_len - 1;
    }
    for (;;) {
        err = rd_kafka_producev(
            rk, RD_KAFKA_V_TOPIC(topic), RD_KAFKA_V_KEY(key, key_len),
            RD_KAFKA_V_VALUE(value, value_len),
            RD_KAFKA_V_MSGFLAGS(RD_KAFKA_MSG_F_COPY), RD_KAFKA_V_END);
        if (err != RD_KAFKA_RESP_ERR__QUEUE_FULL)
            break;
        rd_kafka_poll(rk, 100);
    }
    if (err) {
        fprintf(stderr, "rl_stream_produce: %s\n", rd_kafka_err2str(err));
        return -1;
    }
    rd_kafka_poll(rk, 0);
    return 0;
}

int
main(int argc, char **argv)
{
    char errstr[512];
    rd_kafka_conf_t *conf;
    rd_kafka_t *rk;
    size_t cap = 1 << 20, used = 0;
    char *buf;
    int rc = 0;

    if (argc < 3 || argc > 4) {
        fprintf(stderr,
                "usage: rl_stream_produce BOOTSTRAP TOPIC [LINGER_MS]\n");
        return 2;
    }
    conf = rd_kafka_conf_new();
    if (rd_kafka_conf_set(conf, "bootstrap.servers", argv[1], errstr,
                          sizeof(errstr)) != RD_KAFKA_CONF_OK ||
        rd_kafka_conf_set(conf, "linger.ms", argc == 4 ? argv[3] : "5", errstr,
                          sizeof(errstr)) != RD_KAFKA_CONF_OK ||
        rd_kafka_conf_set(conf, "queue.buffering.max.messages", "1000000",
                          errstr, sizeof(errstr)) != RD_KAFKA_CONF_OK) {
        fprintf(stderr, "rl_stream_produce: %s\n", errstr);
        return 2;
    }
    rd_kafka_conf_set_dr_msg_cb(conf, on_delivery);
    rk = rd_kafka_new(RD_KAFKA_PRODUCER, conf, errstr, sizeof(errstr));
    if (!rk) {
        fprintf(stderr, "rl_stream_produce: %s\n", errstr);
        return 2;
    }
    buf = malloc(cap);
    if (!buf) {
        rd_kafka_destroy(rk);
        return 1;
    }
    for (;;) {
        ssize_t got;
        char *start = buf, *nl;

        if (used == cap) {
            /* One line longer than the buffer: grow it. */
            char *bigger = realloc(buf, cap * 2);

            if (!bigger) {
                rc = 1;
                break;
            }
            buf = bigger;
            cap *= 2;
            start = buf;
        }
        got = read(STDIN_FILENO, buf + used, cap - used);
        if (got < 0 && errno == EINTR)
            continue;
        if (got < 0) {
            perror("rl_stream_produce: read");
            rc = 1;
            break;
        }
        if (got == 0) {
            if (used > 0 && produce_line(rk, argv[2], buf, used) != 0)
                rc = 1;
            break;
        }
        used += (size_t)got;
        while ((nl = memchr(start, '\n', used - (size_t)(start - buf)))) {
            if (produce_line(rk, argv[2], start, (size_t)(nl - start)) != 0)
                rc = 1;
            start = nl + 1;
        }
        used -= (size_t)(start - buf);
        memmove(buf, start, used);
    }
    free(buf);
    if (rd_kafka_flush(rk, 60000) != RD_KAFKA_RESP_ERR_NO_ERROR) {
        fprintf(stderr,
                "rl_stream_produce: %d messages not delivered in 60 s\n",
                rd_kafka_outq_len(rk));
        rc = 1;
    }
    rd_kafka_destroy(rk);
    return rc || failed ? 1 : 0;
}
