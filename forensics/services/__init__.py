"""Front doors and services: one run analysed end to end (`analysis`), folders of runs (`folders`), many runs at
once (`fleet`) and a runs root watched (`watch`)."""
