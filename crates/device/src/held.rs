//! Proof that a card is held: what [`crate::Runtime::load`] asks for.
//!
//! Two things can show it: a [`CardLease`] this process holds, or a
//! [`SupervisedCard`], the card a supervising process holds for the device
//! worker it started (the worker is the only code that constructs one,
//! from the job its supervisor wrote while holding the lease). The trait
//! is sealed, so nothing else can claim a card.

use crate::lock::CardLease;

mod sealed {
    pub trait Sealed {}
}

/// A card held by this process or by its supervisor.
pub trait HeldCard: sealed::Sealed {
    /// The held card ids, ascending.
    fn held_cards(&self) -> &[u32];
}

impl sealed::Sealed for CardLease {}

impl HeldCard for CardLease {
    fn held_cards(&self) -> &[u32] {
        self.cards()
    }
}

/// The cards a supervising process holds while this worker runs.
#[derive(Debug)]
pub struct SupervisedCard {
    cards: Vec<u32>,
}

impl SupervisedCard {
    /// Only the worker protocol builds these (see `worker::serve`).
    pub(crate) fn new(cards: Vec<u32>) -> Self {
        Self { cards }
    }
}

impl sealed::Sealed for SupervisedCard {}

impl HeldCard for SupervisedCard {
    fn held_cards(&self) -> &[u32] {
        &self.cards
    }
}
