#include "parallel/ops.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace coll::parallel::kern {

uint64_t splitmix(uint64_t* s) {
  uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

float uniform(uint64_t* s) { return static_cast<float>(splitmix(s) >> 40) / static_cast<float>(1 << 23) - 1.0f; }

float gelu(float z) { return 0.5f * z * (1.0f + std::erf(z * 0.70710678f)); }

float geluGrad(float z) {
  float cdf = 0.5f * (1.0f + std::erf(z * 0.70710678f));
  float pdf = 0.39894228f * std::exp(-0.5f * z * z);
  return cdf + z * pdf;
}

void linear(const float* x, const float* w, const float* b, float* y, int rows, int k, int n) {
  for (int r = 0; r < rows; ++r) {
    const float* xr = x + static_cast<size_t>(r) * k;
    for (int j = 0; j < n; ++j) {
      float acc = b ? b[j] : 0.0f;
      const float* wj = w + static_cast<size_t>(j) * k;
      for (int i = 0; i < k; ++i) acc += xr[i] * wj[i];
      y[static_cast<size_t>(r) * n + j] = acc;
    }
  }
}

void linearBackward(const float* x, const float* w, const float* dy, float* dx, float* dw, float* db, int rows, int k,
                    int n) {
  if (dx) std::fill(dx, dx + static_cast<size_t>(rows) * k, 0.0f);
  for (int r = 0; r < rows; ++r) {
    const float* xr = x + static_cast<size_t>(r) * k;
    for (int j = 0; j < n; ++j) {
      float g = dy[static_cast<size_t>(r) * n + j];
      if (db) db[j] += g;
      float* dwj = dw + static_cast<size_t>(j) * k;
      for (int i = 0; i < k; ++i) dwj[i] += g * xr[i];
      if (dx) {
        const float* wj = w + static_cast<size_t>(j) * k;
        float* dxr = dx + static_cast<size_t>(r) * k;
        for (int i = 0; i < k; ++i) dxr[i] += g * wj[i];
      }
    }
  }
}

void layerNorm(const float* x, const float* gamma, const float* beta, float* y, float* mean, float* rstd, int rows,
               int d) {
  for (int r = 0; r < rows; ++r) {
    const float* xr = x + static_cast<size_t>(r) * d;
    double m = 0, var = 0;
    for (int i = 0; i < d; ++i) m += xr[i];
    m /= d;
    for (int i = 0; i < d; ++i) var += (xr[i] - m) * (xr[i] - m);
    var /= d;
    float rs = static_cast<float>(1.0 / std::sqrt(var + 1e-5));
    mean[r] = static_cast<float>(m);
    rstd[r] = rs;
    for (int i = 0; i < d; ++i) y[static_cast<size_t>(r) * d + i] = (xr[i] - mean[r]) * rs * gamma[i] + beta[i];
  }
}

void layerNormBackward(const float* x, const float* gamma, const float* mean, const float* rstd, const float* dy,
                       float* dx, float* dgamma, float* dbeta, int rows, int d) {
  for (int r = 0; r < rows; ++r) {
    const float* xr = x + static_cast<size_t>(r) * d;
    const float* dyr = dy + static_cast<size_t>(r) * d;
    double sumG = 0, sumGX = 0;  // the means of dxhat and dxhat * xhat, times d
    for (int i = 0; i < d; ++i) {
      float xhat = (xr[i] - mean[r]) * rstd[r];
      float g = dyr[i] * gamma[i];
      dgamma[i] += dyr[i] * xhat;
      dbeta[i] += dyr[i];
      sumG += g;
      sumGX += g * xhat;
    }
    float mg = static_cast<float>(sumG / d), mgx = static_cast<float>(sumGX / d);
    for (int i = 0; i < d; ++i) {
      float xhat = (xr[i] - mean[r]) * rstd[r];
      dx[static_cast<size_t>(r) * d + i] = rstd[r] * (dyr[i] * gamma[i] - mg - xhat * mgx);
    }
  }
}

void SoftmaxState::reset(int nq, int dh) {
  max.assign(nq, -std::numeric_limits<float>::infinity());
  sum.assign(nq, 0.0f);
  acc.assign(static_cast<size_t>(nq) * dh, 0.0f);
}

namespace {
float dot(const float* a, const float* b, int n) {
  float s = 0;
  for (int i = 0; i < n; ++i) s += a[i] * b[i];
  return s;
}
}  // namespace

void attentionBlock(RowView q, int nq, int qPos0, RowView k, RowView v, int nk, int kPos0, int dh, float scale,
                    SoftmaxState* st) {
  std::vector<float> s(nk);
  for (int i = 0; i < nq; ++i) {
    int visible = std::min(nk, qPos0 + i - kPos0 + 1);  // keys at or before the query's position
    if (visible <= 0) continue;
    float mx = st->max[i];
    for (int j = 0; j < visible; ++j) {
      s[j] = dot(q.row(i), k.row(j), dh) * scale;
      mx = std::max(mx, s[j]);
    }
    // Rescale what earlier blocks added to the new maximum (exp(-inf) = 0 on the first block).
    float c = std::exp(st->max[i] - mx);
    float* acc = st->acc.data() + static_cast<size_t>(i) * dh;
    float sum = st->sum[i] * c;
    for (int t = 0; t < dh; ++t) acc[t] *= c;
    for (int j = 0; j < visible; ++j) {
      float p = std::exp(s[j] - mx);
      sum += p;
      const float* vj = v.row(j);
      for (int t = 0; t < dh; ++t) acc[t] += p * vj[t];
    }
    st->max[i] = mx;
    st->sum[i] = sum;
  }
}

void attentionFinish(const SoftmaxState& st, RowView out, float* lse, int nq, int dh) {
  for (int i = 0; i < nq; ++i) {
    const float* acc = st.acc.data() + static_cast<size_t>(i) * dh;
    float* o = out.row(i);
    for (int t = 0; t < dh; ++t) o[t] = acc[t] / st.sum[i];
    lse[i] = st.max[i] + std::log(st.sum[i]);
  }
}

void attentionBlockBackward(RowView q, RowView dOut, const float* lse, const float* delta, int nq, int qPos0, RowView k,
                            RowView v, RowView dk, RowView dv, int nk, int kPos0, int dh, float scale, RowView dq) {
  for (int i = 0; i < nq; ++i) {
    int visible = std::min(nk, qPos0 + i - kPos0 + 1);
    const float* qi = q.row(i);
    const float* doi = dOut.row(i);
    float* dqi = dq.row(i);
    for (int j = 0; j < visible; ++j) {
      float p = std::exp(dot(qi, k.row(j), dh) * scale - lse[i]);
      float ds = p * (dot(doi, v.row(j), dh) - delta[i]) * scale;
      float* dvj = dv.row(j);
      float* dkj = dk.row(j);
      const float* kj = k.row(j);
      for (int t = 0; t < dh; ++t) {
        dvj[t] += p * doi[t];
        dqi[t] += ds * kj[t];
        dkj[t] += ds * qi[t];
      }
    }
  }
}

}  // namespace coll::parallel::kern
