"""Text for people: the report of one analysis (`report`) and the helpers every face writes with (`render`:
escaping, lines, tables). Reads judgements; decides nothing."""
