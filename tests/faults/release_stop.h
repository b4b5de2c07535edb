/* The stopped-releasing fault (fault_rank.c): a root stopped whole between
 * two of its releases over TCP. */
#ifndef CHORUS_TESTS_FAULTS_RELEASE_STOP_H
#define CHORUS_TESTS_FAULTS_RELEASE_STOP_H

/* From now on, the first frame without payload this process sends over TCP
 * stops it (SIGSTOP) the moment it has gone out. */
void stop_at_first_release(void);

/* Whether that stop came. */
int stopped_at_release(void);

#endif
