ALTER TABLE "price_history" DROP CONSTRAINT "price_history_card_id_cards_id_fk";
