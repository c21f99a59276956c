-- 062_model_prices.sql: what a model's tokens cost, as the operator sets
-- it (`runledger prices set`), for `runledger report --cost`: live and
-- batch tokens and their cost side by side.
--
-- Prices are per million tokens, in whatever currency the operator uses
-- (the report prints numbers, not a currency). batch_discount is the part
-- of the live price a batch does not charge: 0.5 (the providers' usual
-- batch price) makes a batch token cost half a live one.

CREATE TABLE model_prices (
    model          text        PRIMARY KEY,
    input_per_mtok  numeric     NOT NULL
                                CONSTRAINT model_prices_input_min
                                CHECK (input_per_mtok >= 0),
    output_per_mtok numeric     NOT NULL
                                CONSTRAINT model_prices_output_min
                                CHECK (output_per_mtok >= 0),
    batch_discount  numeric     NOT NULL DEFAULT 0.5
                                CONSTRAINT model_prices_batch_discount_range
                                CHECK (batch_discount >= 0
                                       AND batch_discount <= 1),
    updated_by      text        NOT NULL DEFAULT '',
    updated_at      timestamptz NOT NULL DEFAULT now()
);
