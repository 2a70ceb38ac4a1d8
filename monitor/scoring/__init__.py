"""The scoring rules (pure): weighted scores, severity bands and the band rules, for turns
and for cases."""
