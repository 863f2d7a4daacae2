//! Segmented partition log storage in Kafka's exact on-disk format.
