/* torch's CPU dropout mask, drawn as torch draws it: hf_icot/levers/dropout_kernel.py says where it is used.
 *
 * torch's CPU generator is a 32-bit Mersenne Twister (MT19937). Where its CPU bernoulli_(keep) uses it (not oneMKL's
 * own stream), each element takes two words, first the high and then the low half of a 64-bit value, keeps its low
 * 53 bits as a uniform number u = v / 2^53 and draws 1 where u < keep. This file computes the same words from the
 * generator's state (the bytes of Generator.get_state()), writes `scale` where torch draws 1 and 0 elsewhere, and
 * leaves the state as torch's would be after the same draw. v < keep * 2^53 is decided on the two 32-bit halves
 * against `threshold` = ceil(keep * 2^53), which the caller computes exactly.
 */
#include <stdint.h>
#include <string.h>

enum { N = 624, M = 397 };

/* The head of torch's CPU generator state, as get_state() lays it out. */
struct generator_state {
    uint64_t seed;
    int32_t left; /* words still to be read, plus one; the block is refilled when it reaches 0 */
    int32_t seeded;
    uint64_t next; /* index of the next word to read */
    uint64_t words[N];
};

static uint32_t twisted(uint32_t upper, uint32_t lower, uint32_t far) {
    uint32_t y = (upper & 0x80000000u) | (lower & 0x7fffffffu);
    return far ^ (y >> 1) ^ ((0u - (y & 1u)) & 0x9908b0dfu);
}

static void refill(uint32_t *mt) {
    int i = 0;
    for (; i < N - M; i++) mt[i] = twisted(mt[i], mt[i + 1], mt[i + M]);
    for (; i < N - 1; i++) mt[i] = twisted(mt[i], mt[i + 1], mt[i + M - N]);
    mt[N - 1] = twisted(mt[N - 1], mt[0], mt[M - 1]);
}

static void temper(const uint32_t *mt, uint32_t *out) {
    for (int i = 0; i < N; i++) {
        uint32_t y = mt[i];
        y ^= y >> 11;
        y ^= (y << 7) & 0x9d2c5680u;
        y ^= (y << 15) & 0xefc60000u;
        y ^= y >> 18;
        out[i] = y;
    }
}

static float drawn(uint32_t high, uint32_t low, uint32_t threshold_high, uint32_t threshold_low, float scale) {
    uint32_t h = high & 0x1fffffu; /* the 21 bits of the high word inside the 53 */
    return (h < threshold_high || (h == threshold_high && low < threshold_low)) ? scale : 0.0f;
}

void hf_icot_dropout_mask(unsigned char *state_bytes, float *out, int64_t n, uint64_t threshold, float scale) {
    struct generator_state state;
    uint32_t mt[N], words[N];
    memcpy(&state, state_bytes, sizeof state);
    for (int k = 0; k < N; k++) mt[k] = (uint32_t)state.words[k];
    const uint32_t threshold_high = (uint32_t)(threshold >> 32), threshold_low = (uint32_t)threshold;
    int64_t left = state.left - 1, next = (int64_t)state.next, i = 0;
    temper(mt, words);
    while (i < n) {
        if (left == 0) {
            refill(mt);
            temper(mt, words);
            left = N;
            next = 0;
        }
        if (left == 1) { /* an element whose two words straddle a refill */
            uint32_t high = words[next];
            refill(mt);
            temper(mt, words);
            out[i++] = drawn(high, words[0], threshold_high, threshold_low, scale);
            left = N - 1;
            next = 1;
            continue;
        }
        int64_t pairs = left / 2;
        if (pairs > n - i) pairs = n - i;
        const uint32_t *w = words + next;
        for (int64_t k = 0; k < pairs; k++) out[i + k] = drawn(w[2 * k], w[2 * k + 1], threshold_high, threshold_low, scale);
        i += pairs;
        next += 2 * pairs;
        left -= 2 * pairs;
    }
    for (int k = 0; k < N; k++) state.words[k] = mt[k];
    state.left = (int32_t)(left + 1);
    state.next = (uint64_t)next;
    memcpy(state_bytes, &state, sizeof state);
}
