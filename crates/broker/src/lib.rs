//! The weir broker: network layer, request handlers, topic metadata.
