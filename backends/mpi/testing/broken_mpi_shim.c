/* An MPI library wrong in one narrow place, made by interposing on Open MPI
 * or MPICH through the PMPI profiling interface: loaded into every rank with
 * `--mpirun-args "-x LD_PRELOAD=.../libmpi_broken_shim.so -x
 * COLLIE_SHIM_BUG=NAME"`. Each bug is one the suite once passed:
 *   send_buffer       MPI_Send flips a bit of its buffer once the send returned
 *                     (only the rank's own process sees it: backends/remote/worker.cpp)
 *   allgather_input   MPI_Allgather flips a bit of its input (used as scratch)
 *   barrier_subgroup  MPI_Barrier returns at once on a communicator whose
 *                     members are not world ranks 0..k-1
 *   uint8_min         MPI_Reduce of MPI_UINT8_T with MPI_MIN computes MAX
 *   double_sum_float  MPI_Allreduce of MPI_DOUBLE with MPI_SUM rounds the
 *                     result to float (exact for small integers)
 *   barrier_odd_sizes MPI_Barrier returns at once on a communicator of 3 or
 *                     more ranks that is not a power of two
 *   reduce_sendbuf    MPI_Reduce off the root flips a bit of its send buffer
 *                     (MPI only reads it; torch leaves that tensor unspecified)
 *   allgather_six     MPI_Allgather on 6 (or another even, not power-of-two
 *                     count of 6 or more) ranks swaps the blocks of ranks 1 and 2
 *   send_subgroup     MPI_Send on a communicator whose members are not world
 *                     ranks 0..k-1 takes its destination for a world rank
 *   bcast_overrun     MPI_Bcast off the root writes up to the next 8-byte
 *                     boundary past the end of a buffer whose length is not a
 *                     multiple of 8
 *   allreduce_rank_ulp  MPI_Allreduce of MPI_DOUBLE with MPI_SUM on 3 or more
 *                     ranks: the last rank's rounded results come out one ulp
 *                     off (it combined in another order): within any
 *                     rounding tolerance, but not the other ranks' bits
 *   alltoall_swap     MPI_Alltoall on 3 or more ranks swaps the received
 *                     blocks of comm ranks 1 and 2 (MPI_Alltoallv is right)
 *   recv_source_wrong a blocking MPI_Recv from a named source fills
 *                     status.MPI_SOURCE with the next comm rank (a fast path
 *                     that does not fill the status); the data is right
 *   test_never        MPI_Test never completes a request (flag stays 0; MPI_Wait
 *                     and the rest are right): a program polling its
 *                     requests spins for ever
 *   test_ibarrier_early MPI_Test on an MPI_Ibarrier request says it completed
 *                     at its first call, before the other members entered
 *                     (the real barrier goes on hidden and is finished in
 *                     MPI_Comm_free / MPI_Finalize); MPI_Wait is right
 *   test_nbc_large    MPI_Test completing an MPI_Iallreduce of 256 bytes or more
 *                     says done one step early: the last element of its output
 *                     is not written yet (MPI_Wait is right)
 *   test_irecv_status MPI_Test completing an any-source MPI_Irecv leaves
 *                     status.MPI_SOURCE as the caller had it (MPI_Wait fills it)
 *   recv_unaligned_tail a blocking MPI_Recv of 4 KiB or more into a buffer
 *                     not 8-byte aligned leaves its last (address % 8) bytes
 *                     unwritten (a copy loop of aligned 8-byte words)
 *   recv_head_write   a blocking MPI_Recv of 4 KiB or more into a buffer not
 *                     8-byte aligned also writes the bytes from the 8-byte
 *                     boundary below it up to its start (the same loop,
 *                     rounding the start down)
 *   alltoall_pairwise_npow2 blocking MPI_Alltoall on a communicator of 5 or more
 *                     that is not a power of two, blocks of 8 KiB or more (a
 *                     pairwise exchange): it stops one step early, the block
 *                     from comm rank (me + 1) % n keeps its old value
 *   scatter_root_last_npow2 blocking MPI_Scatter on a communicator of 5 or
 *                     more that is not a power of two, rooted at its last
 *                     member: comm rank 0 receives comm rank 1's block
 *   reduce_root_last_large blocking MPI_Reduce of 8 KiB or more on a
 *                     communicator of 5 or more that is not a power of two, to
 *                     its last member: the result's last element is the root's
 *                     own input (the last pipeline segment not combined)
 *   bcast_stale_tree_slot blocking MPI_Bcast on a communicator made in the
 *                     handle slot (MPI_Comm_c2f) of a freed, smaller one uses
 *                     the freed one's tree: members at a distance from the
 *                     root of at least the old size keep their buffer
 *   bcast_chain_tail_6plus blocking MPI_Bcast of 16 KiB or more on 6 or more
 *                     members (a segmented chain): the chain's tail, the member
 *                     just before the root, keeps its last element
 *   allreduce_2proc_odd_split blocking MPI_Allreduce of 64 KiB or more and an odd
 *                     count on exactly 2 members: on comm rank 1 the element at
 *                     the blocks' boundary (count / 2) keeps its input
 * Unset: every call is the library's own. */
#include <mpi.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static int bug_is(const char* name) {
  const char* b = getenv("COLLIE_SHIM_BUG");
  return b && strcmp(b, name) == 0;
}

static int is_world_prefix(MPI_Comm comm);

/* Swaps the second and third blocks of `count` elements of `buf`. */
static void swap_blocks_1_and_2(void* buf, int count, MPI_Datatype type) {
  int type_size;
  PMPI_Type_size(type, &type_size);
  const size_t block = (size_t)count * (size_t)type_size;
  unsigned char* b1 = (unsigned char*)buf + block;
  unsigned char* b2 = b1 + block;
  for (size_t i = 0; i < block; ++i) {
    const unsigned char t = b1[i];
    b1[i] = b2[i];
    b2[i] = t;
  }
}

int MPI_Send(const void* buf, int count, MPI_Datatype type, int dest, int tag, MPI_Comm comm) {
  if (bug_is("send_subgroup") && comm != MPI_COMM_WORLD && dest >= 0 && !is_world_prefix(comm)) {
    MPI_Group g, w;
    int as_comm = MPI_UNDEFINED;
    PMPI_Comm_group(comm, &g);
    PMPI_Comm_group(MPI_COMM_WORLD, &w);
    PMPI_Group_translate_ranks(w, 1, &dest, g, &as_comm);  /* dest read as a world rank */
    PMPI_Group_free(&g);
    PMPI_Group_free(&w);
    if (as_comm != MPI_UNDEFINED) dest = as_comm;
  }
  int rc = PMPI_Send(buf, count, type, dest, tag, comm);
  if (rc == MPI_SUCCESS && count > 0 && bug_is("send_buffer")) ((unsigned char*)buf)[0] ^= 1;
  return rc;
}

int MPI_Allgather(const void* in, int in_count, MPI_Datatype in_type, void* out, int out_count,
                  MPI_Datatype out_type, MPI_Comm comm) {
  int rc = PMPI_Allgather(in, in_count, in_type, out, out_count, out_type, comm);
  int size;
  PMPI_Comm_size(comm, &size);
  if (rc == MPI_SUCCESS && out_count > 0 && bug_is("allgather_six") && size >= 6 && size % 2 == 0 &&
      (size & (size - 1)) != 0) {
    swap_blocks_1_and_2(out, out_count, out_type);
  }
  if (rc == MPI_SUCCESS && in_count > 0 && in != MPI_IN_PLACE && bug_is("allgather_input"))
    ((unsigned char*)in)[0] ^= 1;
  return rc;
}

/* Whether comm's rank i is world rank i for every i. */
static int is_world_prefix(MPI_Comm comm) {
  MPI_Group g, w;
  int size, prefix = 1;
  PMPI_Comm_size(comm, &size);
  PMPI_Comm_group(comm, &g);
  PMPI_Comm_group(MPI_COMM_WORLD, &w);
  for (int i = 0; i < size && prefix; ++i) {
    int in_world;
    PMPI_Group_translate_ranks(g, 1, &i, w, &in_world);
    prefix = in_world == i;
  }
  PMPI_Group_free(&g);
  PMPI_Group_free(&w);
  return prefix;
}

int MPI_Barrier(MPI_Comm comm) {
  if (bug_is("barrier_subgroup") && !is_world_prefix(comm)) return MPI_SUCCESS;
  if (bug_is("barrier_odd_sizes")) {
    int size;
    PMPI_Comm_size(comm, &size);
    if (size >= 3 && (size & (size - 1)) != 0) return MPI_SUCCESS;
  }
  return PMPI_Barrier(comm);
}

/* bcast_stale_tree_slot: per handle slot, the size of the communicator last
 * freed from it and the stale tree size of the one living there now. */
enum { kSlots = 4096 };
static int slot_freed_size[kSlots], slot_stale_size[kSlots];

static int comm_size(MPI_Comm comm) {
  int n = 0;
  PMPI_Comm_size(comm, &n);
  return n;
}

int MPI_Bcast(void* buf, int count, MPI_Datatype type, int root, MPI_Comm comm) {
  int me, type_size;
  PMPI_Comm_rank(comm, &me);
  PMPI_Type_size(type, &type_size);
  const size_t bytes = (size_t)count * (size_t)type_size;
  const int k = PMPI_Comm_c2f(comm), n = comm_size(comm);
  void* kept = NULL;
  if (bug_is("bcast_stale_tree_slot") && bytes > 0 && k >= 0 && k < kSlots && slot_stale_size[k] &&
      (me - root + n) % n >= slot_stale_size[k] && (kept = malloc(bytes)))
    memcpy(kept, buf, bytes);
  /* bcast_chain_tail_6plus: the tail's last element, as it was. */
  unsigned char tail[16];
  const int tail_kept = bug_is("bcast_chain_tail_6plus") && n >= 6 && bytes >= 16384 && (me - root + n) % n == n - 1 &&
                        type_size <= 16;
  if (tail_kept) memcpy(tail, (unsigned char*)buf + bytes - type_size, (size_t)type_size);
  int rc = PMPI_Bcast(buf, count, type, root, comm);
  if (kept) {
    memcpy(buf, kept, bytes);
    free(kept);
  }
  if (tail_kept) memcpy((unsigned char*)buf + bytes - type_size, tail, (size_t)type_size);
  if (rc == MPI_SUCCESS && bug_is("bcast_overrun") && me != root && bytes % 8 != 0)
    memset((unsigned char*)buf + bytes, 0xA5, (bytes + 7) / 8 * 8 - bytes);
  return rc;
}

static int is_power_of_two(int n) { return n > 0 && (n & (n - 1)) == 0; }

int MPI_Reduce(const void* in, void* out, int count, MPI_Datatype type, MPI_Op op, int root, MPI_Comm comm) {
  if (bug_is("uint8_min") && type == MPI_UINT8_T && op == MPI_MIN) op = MPI_MAX;
  int me, size, type_size;
  PMPI_Comm_rank(comm, &me);
  PMPI_Comm_size(comm, &size);
  PMPI_Type_size(type, &type_size);
  const size_t bytes = (size_t)count * (size_t)type_size;
  unsigned char own[16];
  const int last_segment = bug_is("reduce_root_last_large") && size >= 5 && !is_power_of_two(size) &&
                           root == size - 1 && me == root && bytes >= 8192 && (size_t)type_size <= sizeof own;
  if (last_segment) memcpy(own, (const char*)(in == MPI_IN_PLACE ? out : in) + bytes - type_size, (size_t)type_size);
  int rc = PMPI_Reduce(in, out, count, type, op, root, comm);
  if (rc == MPI_SUCCESS && last_segment) memcpy((char*)out + bytes - type_size, own, (size_t)type_size);
  if (rc == MPI_SUCCESS && bug_is("reduce_sendbuf") && me != root && count > 0 && in != MPI_IN_PLACE)
    ((unsigned char*)in)[0] ^= 1;
  return rc;
}

int MPI_Allreduce(const void* in, void* out, int count, MPI_Datatype type, MPI_Op op, MPI_Comm comm) {
  int type_size, size, me;
  PMPI_Type_size(type, &type_size);
  PMPI_Comm_size(comm, &size);
  PMPI_Comm_rank(comm, &me);
  /* allreduce_2proc_odd_split: comm rank 1's input at the blocks' boundary. */
  const size_t boundary = (size_t)(count / 2) * (size_t)type_size;
  unsigned char own[16];
  const int split = bug_is("allreduce_2proc_odd_split") && size == 2 && me == 1 && count % 2 == 1 &&
                    (size_t)count * (size_t)type_size >= 65536 && type_size <= 16;
  if (split) memcpy(own, (const unsigned char*)(in == MPI_IN_PLACE ? out : in) + boundary, (size_t)type_size);
  int rc = PMPI_Allreduce(in, out, count, type, op, comm);
  if (rc == MPI_SUCCESS && split) memcpy((unsigned char*)out + boundary, own, (size_t)type_size);
  if (rc == MPI_SUCCESS && bug_is("double_sum_float") && type == MPI_DOUBLE && op == MPI_SUM)
    for (int i = 0; i < count; ++i) ((double*)out)[i] = (double)(float)((double*)out)[i];
  if (rc == MPI_SUCCESS && bug_is("allreduce_rank_ulp") && type == MPI_DOUBLE && op == MPI_SUM && size >= 3 &&
      me == size - 1)
    for (int i = 0; i < count; ++i) {  /* normal, rounded (low bits set): one ulp further from 0 */
      unsigned long long bits;
      memcpy(&bits, (double*)out + i, 8);
      const unsigned exponent = (unsigned)(bits >> 52) & 0x7FF;
      if ((bits & 0xFF) && exponent != 0 && exponent != 0x7FF) ++bits;
      memcpy((double*)out + i, &bits, 8);
    }
  return rc;
}

/* test_ibarrier_early: the Ibarrier requests not yet tested, and those a
 * test said were done while they were not (waited for when their
 * communicator is freed). */
typedef struct {
  MPI_Request request;
  MPI_Comm comm;
} Barrier;
#define MAX_BARRIERS 4096
static Barrier barriers[MAX_BARRIERS], hidden[MAX_BARRIERS];
static int n_barriers, n_hidden;

int MPI_Ibarrier(MPI_Comm comm, MPI_Request* request) {
  const int rc = PMPI_Ibarrier(comm, request);
  if (rc == MPI_SUCCESS && bug_is("test_ibarrier_early") && n_barriers < MAX_BARRIERS) {
    barriers[n_barriers].request = *request;
    barriers[n_barriers].comm = comm;
    ++n_barriers;
  }
  return rc;
}

static void finish_hidden(MPI_Comm comm, int all) {
  for (int i = 0; i < n_hidden;) {
    if (all || hidden[i].comm == comm) {
      PMPI_Wait(&hidden[i].request, MPI_STATUS_IGNORE);
      hidden[i] = hidden[--n_hidden];
    } else {
      ++i;
    }
  }
}

static void made_comm(MPI_Comm comm) {
  const int k = comm == MPI_COMM_NULL ? -1 : PMPI_Comm_c2f(comm);
  if (!bug_is("bcast_stale_tree_slot") || k < 0 || k >= kSlots) return;
  const int n = comm_size(comm);
  slot_stale_size[k] = slot_freed_size[k] > 0 && slot_freed_size[k] < n ? slot_freed_size[k] : 0;
}

int MPI_Comm_create_group(MPI_Comm comm, MPI_Group group, int tag, MPI_Comm* newcomm) {
  const int rc = PMPI_Comm_create_group(comm, group, tag, newcomm);
  if (rc == MPI_SUCCESS) made_comm(*newcomm);
  return rc;
}

int MPI_Comm_dup(MPI_Comm comm, MPI_Comm* newcomm) {
  const int rc = PMPI_Comm_dup(comm, newcomm);
  if (rc == MPI_SUCCESS) made_comm(*newcomm);
  return rc;
}

int MPI_Comm_free(MPI_Comm* comm) {
  if (n_hidden) finish_hidden(*comm, 0);
  const int k = *comm == MPI_COMM_NULL ? -1 : PMPI_Comm_c2f(*comm);
  if (bug_is("bcast_stale_tree_slot") && k >= 0 && k < kSlots) {
    slot_freed_size[k] = comm_size(*comm);
    slot_stale_size[k] = 0;
  }
  return PMPI_Comm_free(comm);
}

int MPI_Finalize(void) {
  if (n_hidden) finish_hidden(MPI_COMM_NULL, 1);
  return PMPI_Finalize();
}

/* test_nbc_large / test_irecv_status: requests whose completion by MPI_Test
 * the bug bends; `last` holds the last output element's bytes as they were
 * before the op (at most 16). */
typedef struct {
  MPI_Request request;
  unsigned char* last_element;
  int bytes;
  unsigned char before[16];
} Watched;
#define MAX_WATCHED 4096
static Watched watched[MAX_WATCHED];
static int n_watched;

static void watch(MPI_Request request, void* out, int count, MPI_Datatype type) {
  int size = 0;
  PMPI_Type_size(type, &size);
  if (n_watched >= MAX_WATCHED || size > 16) return;
  Watched* w = &watched[n_watched++];
  w->request = request;
  w->bytes = out && count > 0 ? size : 0;
  w->last_element = w->bytes ? (unsigned char*)out + (size_t)(count - 1) * (size_t)size : NULL;
  if (w->bytes) memcpy(w->before, w->last_element, (size_t)w->bytes);
}

int MPI_Iallreduce(const void* in, void* out, int count, MPI_Datatype type, MPI_Op op, MPI_Comm comm,
                   MPI_Request* request) {
  const int rc = PMPI_Iallreduce(in, out, count, type, op, comm, request);
  int size = 0;
  PMPI_Type_size(type, &size);
  if (rc == MPI_SUCCESS && bug_is("test_nbc_large") && (long)count * size >= 256)
    watch(*request, out, count, type);
  return rc;
}

int MPI_Irecv(void* buf, int count, MPI_Datatype type, int source, int tag, MPI_Comm comm, MPI_Request* request) {
  const int rc = PMPI_Irecv(buf, count, type, source, tag, comm, request);
  if (rc == MPI_SUCCESS && bug_is("test_irecv_status") && source == MPI_ANY_SOURCE) watch(*request, NULL, 0, type);
  return rc;
}

int MPI_Test(MPI_Request* request, int* flag, MPI_Status* status) {
  if (bug_is("test_never")) {
    *flag = 0;
    return MPI_SUCCESS;
  }
  for (int i = 0; i < n_watched; ++i) {
    if (watched[i].request != *request) continue;
    Watched w = watched[i];
    MPI_Status own;
    const int source_before = status != MPI_STATUS_IGNORE ? status->MPI_SOURCE : 0;
    const int rc = PMPI_Test(request, flag, status != MPI_STATUS_IGNORE ? status : &own);
    if (rc != MPI_SUCCESS || !*flag) return rc;
    watched[i] = watched[--n_watched];
    if (w.bytes) memcpy(w.last_element, w.before, (size_t)w.bytes); /* the bug: one step early */
    else if (status != MPI_STATUS_IGNORE) status->MPI_SOURCE = source_before;
    return rc;
  }
  for (int i = 0; i < n_barriers; ++i) {
    if (barriers[i].request != *request) continue;
    const MPI_Comm comm = barriers[i].comm;
    barriers[i] = barriers[--n_barriers];
    const int rc = PMPI_Test(request, flag, status);
    if (rc == MPI_SUCCESS && !*flag && n_hidden < MAX_BARRIERS) {
      hidden[n_hidden].request = *request; /* the bug: done, says the test */
      hidden[n_hidden].comm = comm;
      ++n_hidden;
      *request = MPI_REQUEST_NULL;
      *flag = 1;
      if (status != MPI_STATUS_IGNORE) {
        status->MPI_ERROR = MPI_SUCCESS;
        status->MPI_SOURCE = MPI_ANY_SOURCE;
        status->MPI_TAG = MPI_ANY_TAG;
      }
    }
    return rc;
  }
  return PMPI_Test(request, flag, status);
}

int MPI_Alltoall(const void* in, int in_count, MPI_Datatype in_type, void* out, int out_count, MPI_Datatype out_type,
                 MPI_Comm comm) {
  int size, me, type_size;
  PMPI_Comm_size(comm, &size);
  PMPI_Comm_rank(comm, &me);
  PMPI_Type_size(out_type, &type_size);
  const size_t block = (size_t)out_count * (size_t)type_size;
  unsigned char* kept = NULL;
  char* next_block = (char*)out + block * (size_t)((me + 1) % size);
  if (bug_is("alltoall_pairwise_npow2") && size >= 5 && !is_power_of_two(size) && block >= 8192 && (kept = malloc(block)))
    memcpy(kept, next_block, block);
  int rc = PMPI_Alltoall(in, in_count, in_type, out, out_count, out_type, comm);
  if (kept) {
    if (rc == MPI_SUCCESS) memcpy(next_block, kept, block);
    free(kept);
  }
  if (rc == MPI_SUCCESS && bug_is("alltoall_swap") && size >= 3 && out_count > 0) {
    swap_blocks_1_and_2(out, out_count, out_type);
  }
  return rc;
}

int MPI_Scatter(const void* in, int in_count, MPI_Datatype in_type, void* out, int out_count, MPI_Datatype out_type,
                int root, MPI_Comm comm) {
  int size, me, type_size;
  PMPI_Comm_size(comm, &size);
  PMPI_Comm_rank(comm, &me);
  PMPI_Type_size(in_type, &type_size);
  const size_t block = (size_t)in_count * (size_t)type_size;
  if (bug_is("scatter_root_last_npow2") && me == root && size >= 5 && !is_power_of_two(size) && root == size - 1 &&
      block > 0) {
    char* rotated = malloc(block * (size_t)size);
    if (rotated) {
      memcpy(rotated, in, block * (size_t)size);
      memcpy(rotated, (const char*)in + block, block);  /* comm rank 0 gets comm rank 1's block */
      const int rc = PMPI_Scatter(rotated, in_count, in_type, out, out_count, out_type, root, comm);
      free(rotated);
      return rc;
    }
  }
  return PMPI_Scatter(in, in_count, in_type, out, out_count, out_type, root, comm);
}

int MPI_Recv(void* buf, int count, MPI_Datatype type, int source, int tag, MPI_Comm comm, MPI_Status* status) {
  int type_size = 0;
  PMPI_Type_size(type, &type_size);
  const size_t bytes = (size_t)count * (size_t)type_size, misaligned = (uintptr_t)buf % 8;
  unsigned char tail[8];
  const int unaligned = misaligned && bytes >= 4096;
  if (unaligned && bug_is("recv_unaligned_tail")) memcpy(tail, (char*)buf + bytes - misaligned, misaligned);
  int rc = PMPI_Recv(buf, count, type, source, tag, comm, status);
  if (rc == MPI_SUCCESS && unaligned && bug_is("recv_unaligned_tail"))
    memcpy((char*)buf + bytes - misaligned, tail, misaligned);
  if (rc == MPI_SUCCESS && unaligned && bug_is("recv_head_write")) memset((char*)buf - misaligned, 0, misaligned);
  if (rc == MPI_SUCCESS && bug_is("recv_source_wrong") && source >= 0 && status != MPI_STATUS_IGNORE) {
    int size;
    PMPI_Comm_size(comm, &size);
    status->MPI_SOURCE = (source + 1) % size;
  }
  return rc;
}
