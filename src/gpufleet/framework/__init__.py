"""Plugin protocols, outcomes, registry, profiles and the runtime that runs them."""
