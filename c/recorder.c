/* placeholder: replaced by the recorder */
