/*
 * libversions — prints the versions of the libraries Runledger links, as
 * the loaded libraries report them at run time (not the headers it was
 * compiled with), one "name version" line each, for the log of
 * `make test-trixie`.
 *
 *   libversions [--min-rdkafka 0xMMmmrr]
 *
 * With --min-rdkafka it exits 1 when the loaded librdkafka is older than
 * that version (hex like rd_kafka_version(): 0x020601 is 2.6.1): the
 * Debian 13 pass exists to test against a librdkafka with the shutdown
 * fixes Debian 12's 2.0.2 lacks, so a root that loads an older one must
 * not pass for it.
 *
 * Built by tests/trixie/inside.sh with cc and pkg-config; not part of the
 * CMake build.
 */
#include <cjson/cJSON.h>
#include <curl/curl.h>
#include <libpq-fe.h>
#include <librdkafka/rdkafka.h>
#include <microhttpd.h>
#include <openssl/crypto.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int
main(int argc, char **argv)
{
    const curl_version_info_data *cvi;
    unsigned long min_rdkafka = 0;
    int pq;

    if (argc == 3 && strcmp(argv[1], "--min-rdkafka") == 0) {
        char *end = NULL;
        min_rdkafka = strtoul(argv[2], &end, 16);
        if (end == argv[2] || *end != '\0') {
            fprintf(stderr, "libversions: not a hex version: %s\n", argv[2]);
            return 2;
        }
    } else if (argc != 1) {
        fprintf(stderr, "usage: libversions [--min-rdkafka 0xMMmmrr]\n");
        return 2;
    }

    pq = PQlibVersion();
    cvi = curl_version_info(CURLVERSION_NOW);
    printf("librdkafka %s\n", rd_kafka_version_str());
    /* PQlibVersion is major * 10000 + minor from PostgreSQL 10 on. */
    printf("libpq %d.%d\n", pq / 10000, pq % 10000);
    printf("libcurl %s\n", curl_version());
    printf("libcurl-ssl %s\n", cvi->ssl_version ? cvi->ssl_version : "none");
    printf("openssl %s\n", OpenSSL_version(OPENSSL_VERSION));
    printf("cjson %s\n", cJSON_Version());
    printf("libmicrohttpd %s\n", MHD_get_version());

    /* rd_kafka_version() is 0xMMmmrrxx; the last byte is the pre-release. */
    if (min_rdkafka != 0 &&
        ((unsigned long)rd_kafka_version() >> 8) < min_rdkafka) {
        fprintf(stderr,
                "libversions: librdkafka %s is older than the %lx.%lx.%lx "
                "this pass is for\n",
                rd_kafka_version_str(), min_rdkafka >> 16,
                (min_rdkafka >> 8) & 0xff, min_rdkafka & 0xff);
        return 1;
    }
    return 0;
}
