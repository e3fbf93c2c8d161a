/* Kiln's MPI check. Every rank reports its host; then the first rank on each node
 * runs a ping-pong with the first rank on the next node, around a ring of the nodes,
 * one pair at a time. Rank 0 prints one JSON document:
 *   {"ranks": N, "hosts": [host of rank 0, ...],
 *    "pairs": [{"node": A, "peer": B, "latency_us": L, "bandwidth_gbps": W}, ...]}
 * latency: half the round trip of 8 bytes; bandwidth: 4 MiB each way, 10^9 bytes/s.
 * Built by the mpi role with the distribution's mpicc; started by srun (PMIx). */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define NAME MPI_MAX_PROCESSOR_NAME
#define SMALL 8
#define SMALL_ITERS 1000
#define LARGE (4 << 20)
#define LARGE_ITERS 20
#define WARMUP 5

/* Seconds for one round trip of `bytes`, measured by the side that sends first. */
static double round_trip(int first, int peer, char *buf, int bytes, int iters)
{
    double start = 0;
    for (int i = -WARMUP; i < iters; i++) {
        if (i == 0)
            start = MPI_Wtime();
        if (first) {
            MPI_Send(buf, bytes, MPI_BYTE, peer, 0, MPI_COMM_WORLD);
            MPI_Recv(buf, bytes, MPI_BYTE, peer, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        } else {
            MPI_Recv(buf, bytes, MPI_BYTE, peer, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            MPI_Send(buf, bytes, MPI_BYTE, peer, 0, MPI_COMM_WORLD);
        }
    }
    return (MPI_Wtime() - start) / iters;
}

int main(int argc, char **argv)
{
    int rank, size, len;
    char host[NAME] = {0};
    MPI_Init(&argc, &argv);
    /* Open MPI 5's ob1 crashes a rank that receives a message on MPI_COMM_WORLD before
     * its own MPI_Init has set the communicator up: a peer that leaves the closing PMIx
     * fence first may send that early (open-mpi/ompi#12495). A moment's pause before
     * the first message keeps the check from reporting that race as a broken node. */
    sleep(1);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    MPI_Get_processor_name(host, &len);

    char *hosts = calloc((size_t)size, NAME);
    int *leaders = calloc((size_t)size, sizeof(int));
    char *buf = calloc(LARGE, 1);
    MPI_Allgather(host, NAME, MPI_CHAR, hosts, NAME, MPI_CHAR, MPI_COMM_WORLD);

    /* The first rank of each node, in rank order. */
    int nodes = 0;
    for (int r = 0; r < size; r++) {
        int seen = 0;
        for (int n = 0; n < nodes && !seen; n++)
            seen = strcmp(hosts + (size_t)leaders[n] * NAME, hosts + (size_t)r * NAME) == 0;
        if (!seen)
            leaders[nodes++] = r;
    }

    /* A ring of nodes; two nodes make one pair. */
    int pairs = nodes < 2 ? 0 : nodes == 2 ? 1 : nodes;
    double *latency = calloc((size_t)pairs + 1, sizeof(double));
    double *bandwidth = calloc((size_t)pairs + 1, sizeof(double));
    double *sum_latency = calloc((size_t)pairs + 1, sizeof(double));
    double *sum_bandwidth = calloc((size_t)pairs + 1, sizeof(double));
    for (int p = 0; p < pairs; p++) {
        int a = leaders[p], b = leaders[(p + 1) % nodes];
        if (rank == a || rank == b) {
            int peer = rank == a ? b : a;
            double small = round_trip(rank == a, peer, buf, SMALL, SMALL_ITERS);
            double large = round_trip(rank == a, peer, buf, LARGE, LARGE_ITERS);
            if (rank == a) {
                latency[p] = small / 2 * 1e6;
                bandwidth[p] = 2.0 * LARGE / large / 1e9;
            }
        }
        MPI_Barrier(MPI_COMM_WORLD);
    }
    MPI_Reduce(latency, sum_latency, pairs + 1, MPI_DOUBLE, MPI_SUM, 0, MPI_COMM_WORLD);
    MPI_Reduce(bandwidth, sum_bandwidth, pairs + 1, MPI_DOUBLE, MPI_SUM, 0, MPI_COMM_WORLD);

    if (rank == 0) {
        printf("{\"ranks\": %d, \"hosts\": [", size);
        for (int r = 0; r < size; r++)
            printf("%s\"%s\"", r ? ", " : "", hosts + (size_t)r * NAME);
        printf("], \"pairs\": [");
        for (int p = 0; p < pairs; p++)
            printf("%s{\"node\": \"%s\", \"peer\": \"%s\", \"latency_us\": %.2f, "
                   "\"bandwidth_gbps\": %.3f}",
                   p ? ", " : "", hosts + (size_t)leaders[p] * NAME,
                   hosts + (size_t)leaders[(p + 1) % nodes] * NAME, sum_latency[p],
                   sum_bandwidth[p]);
        printf("]}\n");
    }
    MPI_Finalize();
    return 0;
}
