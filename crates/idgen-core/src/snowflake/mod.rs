//! Snowflake: the bit layout, the state word, the clock gate, the reservation and text forms.
