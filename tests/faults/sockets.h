/* A fault-suite rank's own sockets: what the faults that concern the
 * connections (fault_rank.c) do to them. */
#ifndef CHORUS_TESTS_FAULTS_SOCKETS_H
#define CHORUS_TESTS_FAULTS_SOCKETS_H

/* Up to max of this process's connections to its peers; returns how many. */
int peer_sockets(int* fds, int max);

/* wrong-token: connects to the job's store and to this rank's own listener
 * as a stranger with another job's token, and prints "refused store|hello
 * RANK 0|1" (1: the connection was closed without an answer). */
void intrude(int rank, int size);

/* malformed-frame (truncate 0): writes 56 bytes that are no frame header
 * into each connection to a peer; truncated (1): the first 20 bytes of a
 * frame header, then shuts the connections down. */
void corrupt_connections(int truncate);

#endif
