//! Key choice: which key index each request uses. The generator must not allocate or lock per
//! request, so this is a tiny self-contained PRNG plus O(1) samplers (zipf by rejection
//! inversion, no CDF table, so a keyspace of 10^9 costs no memory).

use anyhow::{bail, Context, Result};

/// SplitMix64: fast, statistically fine for load generation, and deterministic per seed.
#[derive(Debug, Clone)]
pub struct Rng(u64);

impl Rng {
    /// A generator whose sequence depends only on `seed`.
    pub fn new(seed: u64) -> Rng {
        Rng(seed ^ 0x9E37_79B9_7F4A_7C15)
    }

    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in [0, 1).
    pub fn next_f64(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 * (1.0 / (1u64 << 53) as f64)
    }

    /// Uniform in [0, n); multiply-shift avoids a division and is unbiased enough here.
    pub fn below(&mut self, n: u64) -> u64 {
        ((u128::from(self.next_u64()) * u128::from(n)) >> 64) as u64
    }
}

/// How keys are drawn from the keyspace `0..n`.
#[derive(Debug, Clone, PartialEq)]
pub enum KeyDist {
    /// Every key equally likely.
    Uniform,
    /// Each client walks its own stride of the keyspace: client i uses i, i+C, i+2C, ...
    Sequential,
    /// Rank k (key k-1) has weight 1/k^s: a few hot keys, a long tail.
    Zipf(f64),
}

impl std::str::FromStr for KeyDist {
    type Err = anyhow::Error;
    fn from_str(s: &str) -> Result<KeyDist> {
        match s {
            "uniform" => Ok(KeyDist::Uniform),
            "sequential" => Ok(KeyDist::Sequential),
            "zipf" => Ok(KeyDist::Zipf(0.99)),
            _ => match s.strip_prefix("zipf:") {
                Some(x) => {
                    let e: f64 = x.parse().context("zipf exponent")?;
                    if !(e > 0.0 && e.is_finite()) {
                        bail!("zipf exponent must be > 0, got {e}");
                    }
                    Ok(KeyDist::Zipf(e))
                }
                None => bail!("unknown key distribution {s:?} (uniform|sequential|zipf[:s])"),
            },
        }
    }
}

/// Per-client key source.
#[derive(Debug, Clone)]
pub enum KeyGen {
    /// Uniform over `0..n`.
    Uniform { n: u64 },
    /// `next`, `next+step`, ... modulo `n`.
    Sequential { next: u64, step: u64, n: u64 },
    /// Zipf over ranks `1..=n`, returned as `rank-1`.
    Zipf(Zipf),
}

impl KeyGen {
    /// The generator for client `client` of `clients` over a keyspace of `n` keys.
    pub fn new(dist: &KeyDist, n: u64, client: u64, clients: u64) -> KeyGen {
        let n = n.max(1);
        match dist {
            KeyDist::Uniform => KeyGen::Uniform { n },
            KeyDist::Sequential => KeyGen::Sequential {
                next: client % n,
                step: clients.max(1),
                n,
            },
            KeyDist::Zipf(s) => KeyGen::Zipf(Zipf::new(n, *s)),
        }
    }

    /// The next key index.
    pub fn next(&mut self, rng: &mut Rng) -> u64 {
        match self {
            KeyGen::Uniform { n } => rng.below(*n),
            KeyGen::Sequential { next, step, n } => {
                let k = *next;
                *next = (k + *step) % *n;
                k
            }
            KeyGen::Zipf(z) => z.sample(rng) - 1,
        }
    }
}

/// Zipf sampler by rejection inversion (W. Hörmann, G. Derflinger, 1996): O(1) expected time
/// and O(1) memory for any `n`.
#[derive(Debug, Clone)]
pub struct Zipf {
    n: f64,
    s: f64,
    h_x1: f64,
    h_n: f64,
    cut: f64,
}

impl Zipf {
    /// Ranks `1..=n` with exponent `s > 0`.
    pub fn new(n: u64, s: f64) -> Zipf {
        let mut z = Zipf {
            n: n as f64,
            s,
            h_x1: 0.0,
            h_n: 0.0,
            cut: 0.0,
        };
        z.h_x1 = z.h_integral(1.5) - 1.0;
        z.h_n = z.h_integral(z.n + 0.5);
        z.cut = 2.0 - z.h_integral_inv(z.h_integral(2.5) - z.h(2.0));
        z
    }

    /// One rank in `1..=n`.
    pub fn sample(&self, rng: &mut Rng) -> u64 {
        loop {
            let u = self.h_n + rng.next_f64() * (self.h_x1 - self.h_n);
            let x = self.h_integral_inv(u);
            let k = (x + 0.5).floor().clamp(1.0, self.n);
            if k - x <= self.cut || u >= self.h_integral(k + 0.5) - self.h(k) {
                return k as u64;
            }
        }
    }

    fn h(&self, x: f64) -> f64 {
        (-self.s * x.ln()).exp()
    }

    fn h_integral(&self, x: f64) -> f64 {
        let lx = x.ln();
        expm1_over_x((1.0 - self.s) * lx) * lx
    }

    fn h_integral_inv(&self, x: f64) -> f64 {
        let t = (x * (1.0 - self.s)).max(-1.0);
        (ln1p_over_x(t) * x).exp()
    }
}

/// (e^x - 1) / x, accurate near 0 (the s → 1 limit).
fn expm1_over_x(x: f64) -> f64 {
    if x.abs() > 1e-8 {
        x.exp_m1() / x
    } else {
        1.0 + x * 0.5 * (1.0 + x / 3.0)
    }
}

/// ln(1 + x) / x, accurate near 0.
fn ln1p_over_x(x: f64) -> f64 {
    if x.abs() > 1e-8 {
        x.ln_1p() / x
    } else {
        1.0 - x * (0.5 - x / 3.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn uniform_stays_in_range_and_covers_it() {
        let mut rng = Rng::new(1);
        let mut g = KeyGen::new(&KeyDist::Uniform, 10, 0, 1);
        let mut seen = [0u32; 10];
        for _ in 0..10_000 {
            seen[g.next(&mut rng) as usize] += 1;
        }
        assert!(seen.iter().all(|&c| (800..1200).contains(&c)), "{seen:?}");
    }

    #[test]
    fn sequential_clients_partition_the_keyspace() {
        let mut rng = Rng::new(1);
        let mut all: Vec<u64> = (0..3)
            .flat_map(|c| {
                let mut g = KeyGen::new(&KeyDist::Sequential, 9, c, 3);
                (0..3).map(|_| g.next(&mut rng)).collect::<Vec<_>>()
            })
            .collect();
        all.sort_unstable();
        assert_eq!(all, (0..9).collect::<Vec<_>>());
    }

    #[test]
    fn zipf_matches_its_distribution() {
        let (n, s) = (100u64, 1.0);
        let z = Zipf::new(n, s);
        let mut rng = Rng::new(7);
        let mut counts = vec![0u32; n as usize + 1];
        let draws = 200_000;
        for _ in 0..draws {
            let k = z.sample(&mut rng);
            assert!((1..=n).contains(&k));
            counts[k as usize] += 1;
        }
        let norm: f64 = (1..=n).map(|k| (k as f64).powf(-s)).sum();
        for k in [1usize, 2, 10] {
            let expected = draws as f64 * (k as f64).powf(-s) / norm;
            let err = (f64::from(counts[k]) - expected).abs() / expected;
            assert!(err < 0.05, "rank {k}: {} vs {expected}", counts[k]);
        }
    }

    #[test]
    fn parses_distributions() {
        assert_eq!("zipf:1.2".parse::<KeyDist>().unwrap(), KeyDist::Zipf(1.2));
        assert_eq!("uniform".parse::<KeyDist>().unwrap(), KeyDist::Uniform);
        assert!("zipf:-1".parse::<KeyDist>().is_err());
        assert!("gauss".parse::<KeyDist>().is_err());
    }
}
