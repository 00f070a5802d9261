pub mod checkpoint;
pub mod epoch;
pub mod producer_state;
