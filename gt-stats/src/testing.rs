//! What the tests of this crate and of the crates above share (rule 7): the simulations'
//! generator, xorshift64 for uniforms and Box-Muller for normals, deterministic from its seed so
//! that a simulation is repeatable; the samples the reference figures (scipy 1.17.1) were
//! computed on; a relative comparison. Not for anything but tests.

/// Reference samples: scipy's `ttest_ind(equal_var=False)`, `mannwhitneyu` and `t.ppf` were
/// run on them (the tests quote the figures).
pub const A: [f64; 6] = [12.1, 14.3, 9.8, 15.6, 11.2, 12.4];
pub const B: [f64; 6] = [5.2, 6.1, 4.9, 6.3, 5.5, 6.0];
/// With ties.
pub const A2: [f64; 10] = [1., 2., 2., 3., 4., 4., 5., 6., 7., 8.];
pub const B2: [f64; 10] = [2., 3., 3., 4., 5., 6., 6., 7., 9., 9.];
/// Unequal sizes.
pub const A3: [f64; 5] = [1.0, 2.5, 3.1, 4.7, 5.2];
pub const B3: [f64; 7] = [2.0, 3.5, 4.1, 6.0, 7.3, 8.8, 9.1];

/// `a` is within `rel` of `b`, relatively.
pub fn close(a: f64, b: f64, rel: f64) -> bool {
    (a - b).abs() <= rel * b.abs().max(1e-300)
}

/// A small deterministic generator.
#[derive(Debug, Clone)]
pub struct Rng(u64);

impl Rng {
    /// A generator whose state is `seed` times the golden-ratio constant, made odd (never 0).
    pub fn new(seed: u64) -> Rng {
        Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1)
    }

    /// A uniform value in (0, 1), never 0 or 1.
    pub fn uniform(&mut self) -> f64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        ((self.0 >> 11) as f64 + 0.5) / (1u64 << 53) as f64
    }

    /// A normal value with this mean and standard deviation (two uniforms, Box-Muller's cosine).
    pub fn normal(&mut self, mean: f64, sd: f64) -> f64 {
        let (u, v) = (self.uniform(), self.uniform());
        mean + sd * (-2.0 * u.ln()).sqrt() * (2.0 * std::f64::consts::PI * v).cos()
    }
}
