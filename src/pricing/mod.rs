//! Where GPU time and energy meet money: the config's price lists and the power tariff as
//! tables the rollup SQL joins (`tables`), and time-of-use tariffs resolved onto the 15-minute
//! UTC grid (`tariff`).

pub mod tables;
pub mod tariff;
pub use tables::PricingError;
