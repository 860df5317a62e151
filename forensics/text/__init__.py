"""Text for people: the command line's grammar (`grammar`), the report of one analysis (`report`) and the helpers every
face writes with (`render`: escaping, lines, tables). Reads judgements; decides nothing."""
