"""Hand-written word lists for the offline extractor.

The offline extractor runs with no model and no download, so everything it knows about
English news lives here: a small gazetteer (countries, capitals, US states, major cities and
regions), the words that mark a person (titles), an organisation (suffixes and heads) or an
event, and the words that must never become entities on their own (sentence starters,
Reuters table words and trailers, months, units). The lists are deliberately small and
readable; they are data, not logic, so that tuning them never touches the extractor.
"""

from __future__ import annotations


def _words(text: str) -> frozenset[str]:
    return frozenset(text.split())


def _lines(text: str) -> tuple[str, ...]:
    return tuple(line.strip() for line in text.strip().splitlines() if line.strip())


# Canonical geo names; aliases map onto them below. Multi-word names are matched as token runs.
_GEO_NAMES = _lines("""
Afghanistan
Albania
Algeria
Angola
Argentina
Australia
Austria
Bahrain
Bangladesh
Belgium
Bolivia
Botswana
Brazil
Britain
Bulgaria
Burma
Cameroon
Canada
Chad
Chile
China
Colombia
Costa Rica
Cuba
Cyprus
Czechoslovakia
Denmark
Dominican Republic
East Germany
Ecuador
Egypt
El Salvador
England
Ethiopia
Fiji
Finland
France
Gabon
Ghana
Greece
Guatemala
Guyana
Haiti
Honduras
Hong Kong
Hungary
Iceland
India
Indonesia
Iran
Iraq
Ireland
Israel
Italy
Ivory Coast
Jamaica
Japan
Jordan
Kenya
Kuwait
Lebanon
Liberia
Libya
Luxembourg
Madagascar
Malawi
Malaysia
Mali
Malta
Mauritius
Mexico
Mongolia
Morocco
Mozambique
Namibia
Nepal
Netherlands
New Zealand
Nicaragua
Niger
Nigeria
North Korea
Northern Ireland
Norway
Oman
Pakistan
Panama
Papua New Guinea
Paraguay
Peru
Philippines
Poland
Portugal
Qatar
Romania
Saudi Arabia
Scotland
Senegal
Singapore
Somalia
South Africa
South Korea
Soviet Union
Spain
Sri Lanka
Sudan
Surinam
Sweden
Switzerland
Syria
Taiwan
Tanzania
Thailand
Trinidad
Tunisia
Turkey
Uganda
United Arab Emirates
United Kingdom
United States
Uruguay
Vatican
Venezuela
Vietnam
Wales
West Germany
Yemen
Yugoslavia
Zaire
Zambia
Zimbabwe
Germany
Third World
Abu Dhabi
Amsterdam
Antwerp
Ankara
Athens
Baghdad
Bangkok
Beijing
Peking
Beirut
Belgrade
Berlin
Bern
Berne
Bogota
Bonn
Brasilia
Brussels
Bucharest
Budapest
Buenos Aires
Cairo
Canberra
Caracas
Copenhagen
Dhaka
Dublin
Geneva
Havana
Helsinki
Islamabad
Jakarta
Jerusalem
Kabul
Kampala
Karachi
Khartoum
Kuala Lumpur
Lagos
Lima
Lisbon
London
Madrid
Managua
Manila
Mexico City
Montevideo
Moscow
Nairobi
New Delhi
Nicosia
Oslo
Ottawa
Paris
Prague
Pretoria
Quito
Rabat
Riyadh
Rome
Santiago
Seoul
Sofia
Stockholm
Taipei
Tehran
Tel Aviv
Tokyo
Tripoli
Tunis
Vienna
Warsaw
Washington
Wellington
Zurich
Alabama
Alaska
Arizona
Arkansas
California
Colorado
Connecticut
Delaware
Florida
Georgia
Hawaii
Idaho
Illinois
Indiana
Iowa
Kansas
Kentucky
Louisiana
Maine
Maryland
Massachusetts
Michigan
Minnesota
Mississippi
Missouri
Montana
Nebraska
Nevada
New Hampshire
New Jersey
New Mexico
New York
North Carolina
North Dakota
Ohio
Oklahoma
Oregon
Pennsylvania
Rhode Island
South Carolina
South Dakota
Tennessee
Texas
Utah
Vermont
Virginia
West Virginia
Wisconsin
Wyoming
Atlanta
Baltimore
Boston
Chicago
Cincinnati
Cleveland
Dallas
Denver
Detroit
Houston
Kansas City
Los Angeles
Miami
Milwaukee
Minneapolis
New Orleans
Philadelphia
Phoenix
Pittsburgh
Rotterdam
San Francisco
Seattle
St Louis
Toronto
Montreal
Vancouver
Sydney
Melbourne
Frankfurt
Hamburg
Munich
Duesseldorf
Milan
Osaka
Shanghai
Bombay
Calcutta
Singapore City
Johannesburg
Rio de Janeiro
Sao Paulo
Chiang Mai
Bahia
Quebec
Ontario
Alberta
British Columbia
Saskatchewan
Manitoba
Africa
Asia
Europe
Latin America
North America
South America
Central America
Middle East
Far East
Western Europe
Eastern Europe
Southeast Asia
Persian Gulf
Gulf
North Sea
Pacific
Atlantic
Caribbean
Antarctica
""")

GEO_ALIASES: dict[str, str] = {
    "u s": "United States",
    "us": "United States",
    "u s a": "United States",
    "usa": "United States",
    "america": "United States",
    "u k": "Britain",
    "uk": "Britain",
    "great britain": "Britain",
    "united kingdom": "Britain",
    "ussr": "Soviet Union",
    "u s s r": "Soviet Union",
    "peking": "Beijing",
    "berne": "Bern",
    "holland": "Netherlands",
    "the netherlands": "Netherlands",
    "st louis": "St Louis",
    "saint louis": "St Louis",
    "the gulf": "Gulf",
    "arabian gulf": "Persian Gulf",
    "calif": "California",
    "n y": "New York",
    "n j": "New Jersey",
    "ill": "Illinois",
    "fla": "Florida",
    "colo": "Colorado",
    "mass": "Massachusetts",
    "conn": "Connecticut",
    "tex": "Texas",
    "mich": "Michigan",
    "minn": "Minnesota",
    "wis": "Wisconsin",
    "okla": "Oklahoma",
    "ariz": "Arizona",
    "tenn": "Tennessee",
    "n c": "North Carolina",
    "s c": "South Carolina",
    "n h": "New Hampshire",
    "h k": "Hong Kong",
    "n z": "New Zealand",
    "w germany": "West Germany",
}

# Maximum number of tokens in a gazetteer name ("Papua New Guinea", "Rio de Janeiro").
GEO_MAX_TOKENS = 3

# Words that introduce a person when they precede a name inside a capitalised run.
TITLES = _words("""
Mr Mrs Ms Miss Dr Sir Lord Lady Dame Sen Rep Gov Gen Lt Col Capt Adm Sgt Prof Rev
President Chairman Chairwoman Chairperson Minister Secretary Governor Senator
Representative Congressman Congresswoman Chancellor Premier King Queen Prince Princess
Sheikh Emir Shah Sultan Pope Ayatollah Judge Justice Ambassador Commissioner Director
Spokesman Spokeswoman Treasurer Mayor Chief Executive Officer Vice Deputy Undersecretary
Under Assistant Leader Professor Presidents Ministers Economist Analyst Counsel Attorney
Managing Envoy Speaker Delegate Negotiator Head Dictator Colonel Founder Cofounder Co-founder
Chair Engineer Partner Mediator Forecaster Strategist Prosecutor Archbishop Rabbi Imam
""")

# Portfolio words qualify a title ("Finance Minister", "Secretary of State"); they are not names.
PORTFOLIO = _words("""
Finance Foreign Trade Industry Agriculture Commerce Labor Labour Energy Defence Defense
Treasury Interior Economy Economic Economics Affairs Planning Transport Transportation
Exchequer Oil Petroleum Mines Mining Justice Health Education Fisheries Budget State
International Industrial Privatisation Privatization Development Cooperation Co-operation
Home Prime Acting Executive Operating Financial Senior Executive Associate Former Joint
Supply Supplies Public Works Communications Housing Tourism Forestry Food Information
General Of Of the
Commercial Monetary Fiscal Trading Marketing Sales Production Chief Regional Central
""")

# Organisation suffixes dropped from display names so "Texaco Inc" and "Texaco" share a key.
CORPORATE_SUFFIXES = _words("""
Inc Inc. Incorporated Corp Corp. Co Co. Ltd Ltd. Limited Plc PLC plc LLC SA S.A. AG NV N.V.
BV Cos Cos. GmbH Spa SpA Bhd KK Pty Pty. Ag Nv
""")

# A run containing one of these words names an organisation.
ORG_HEADS = _words("""
Inc Corp Co Ltd Plc Cos Corporation Company Companies Bank Banks Bancorp Bancshares
Association Ministry Reserve Exchange Exchanges Group Party Council Commission Department
Board Fund Agency Authority Organisation Organization Union Committee Industries Holdings
Holding Trust Partners Securities Airlines Airways Motors Institute University Federation
Office Court Congress Parliament Senate Administration Communities Community Bureau League
Cartel Chamber Society Service Services Systems Technologies Technology Electronics
Petroleum Oil Chemical Chemicals Steel Mines Mining Brothers Bros Financial Insurance
Investment Investments Capital Savings Mortgage Energy Resources Laboratories Foods
Corporations Enterprises Products Stores Railroad Railway Railways Communications Cabinet
Assembly Navy Army Fed Treasury Diet Bundesbank Bundestag Kremlin Pentagon Commerzbank
Fargo Lynch Telegraph Telephone Gas Electric Power Utilities Network Credit Lines Shipping
Exporters Producers Workers Foundation Club Pool Index Markets School Academy College Division
Observatory
""")

# Heads after which "of" continues a name ("Bank of Japan", "Gulf of Mexico").
OF_HEADS = ORG_HEADS | _words("""
Gulf Republic Kingdom Bay Strait Straits Sea Isle Isles Port City State Province House
Chamber University Department Ministry Bank Organization Organisation Secretary Minister
Chancellor Commonwealth Federation Union Emirates Court Statue Bureau Association Council
Institute Board Commission College Museum District Cape Sultanate Duchy
""")

# A run ending with one of these words names an event.
EVENT_HEADS = _words("""
Summit Conference Talks Election Elections Strike Strikes Meeting Meetings Round Games
Olympics War Crisis Accord Accords Agreement Pact Treaty Convention Congress Forum Session
Crash Revolution Festival Tour Visit Negotiations Embargo Agreement Plenary
""")

# A run ending with one of these words names a place ("Downing Street", "Sao Paulo State").
GEO_HEADS = _words("""
Street Avenue River Island Islands Sea Bay Valley Province County Strait Straits Canal
Peninsula Mountains Lake Ocean Coast Basin Delta Desert Square Harbour Harbor Region
Spaceport Airport Plains
""")

# Heads after which "on" continues a name ("General Agreement on Tariffs and Trade").
ON_HEADS = _words("Agreement Conference Commission Committee Council Convention Treaty")

# Demonym endings: "Nicaraguan", "Texans", "Iraqi" are adjectives of a gazetteer place.
DEMONYM_ENDINGS = ("an", "ans", "ian", "ians", "ese", "i", "is", "ish", "ean", "eans")

# Lower-case particles that stay inside a capitalised name ("Ciriaco De Mita", "von Weizsaecker").
NAME_PARTICLES = _words("de du von van der den da la le al bin el di del dos das ter")

# Function words and common sentence starters: stripped from the front of a run.
FUNCTION_WORDS = _words("""
The A An This That These Those It Its He She They We I You His Her Their Our Your My
In On At For From With By As If When While After Before Under Over Also And Or But Nor
So Yet Not No Yes All Any Some Most Many Much More Less Few Each Every Both Either
Neither Other Others Such Than Then There Here Where Which Who Whom Whose What Why How
However Meanwhile Moreover Furthermore Although Though Because Since Until Unless Despite
During Among Between Against Through Into Onto Upon About Above Below Around Across Along
Of To Up Down Out Off Near Per Via Last Next Earlier Later Today Yesterday Tomorrow Now
Once Only Just Even Still Already Again Further Another Overall Including Excluding
Following According Let Do Does Did Is Are Was Were Be Been Has Have Had Will Would Could
Should Can May Might Must Shall Dear Please Thank Under Without Within Whether Like Unlike
Given Instead Nonetheless Nevertheless Currently Recently Separately Similarly Finally
Initially
""")

# Common nouns and verbs that start Reuters sentences ("Analysts said ..."): stripped from
# the front of a run only when the run starts a sentence.
STARTER_WORDS = _words("""
Analysts Officials Sources Dealers Traders Economists Bankers Shares Prices Sales Earnings
Results Revenues Profits Shareholders Stockholders Investors Members Delegates Details
Terms Figures Total Net Asked Told Said Says Added Under Industry Government Company
""")

# Names that keep their possessive: "Moody's Investors Service" is one organisation.
POSSESSIVE_NAMES = _words("""
Moody's Macy's McDonald's Sotheby's Christie's Lloyd's Dillard's Wendy's Friendly's Poor's
Hardee's Carter's Denny's Sainsbury's Kellogg's Campbell's Wrigley's Smucker's Nabisco's
""")

# Names with "and" inside; otherwise "and" ends a run ("Britain and France" are two places).
AND_NAMES = frozenset(
    tuple(name.split())
    for name in _lines("""
Securities and Exchange Commission
Standard and Poor's
Procter and Gamble
Johnson and Johnson
Marks and Spencer
Trade and Industry
Finance and Public Credit
Food and Drug Administration
Oil and Gas
Power and Light
Ways and Means
Savings and Loan
Tariffs and Trade
Health and Human Services
Housing and Urban Development
Trade and Development
""")
)

# Month and day names: never entities, stripped from either end of a run.
CALENDAR = _words("""
January February March April May June July August September October November December
Jan Feb Mar Apr Jun Jul Aug Sep Sept Oct Nov Dec Monday Tuesday Wednesday Thursday Friday
Saturday Sunday Mon Tue Tues Wed Thu Thur Thurs Fri Sat Sun Spring Summer Autumn Winter
""")

# Reuters table words, units and trailers: never entities, stripped from either end of a run.
BOILERPLATE = _words("""
Reuter Reuters REUTER Note NOTE Year Years Quarter Quarters Month Months Week Weeks Day
Days Mths Mth Qtr Qtrs Shr Shrs Cts Ct Dlrs Dlr Mln Mlns Billion Billions Bln Bil Vs Avg
Revs Rev Oper Pct Tonnes Tons Yen Stg Francs Marks Lire Pesos Cents Dollars Dollar
Sterling Rupees Rand Yuan Guilders Krona Kronor Div Divs Qtly Pay Record Prior Loss Profit
Income Assets Deposits Loans EST EDT GMT LIBOR Libor FOB CIF ECU ECUs SDR SDRs PINs
One Two Three Four Five Six Seven Eight Nine Ten Eleven Twelve Hundred Thousand Million
Trillion Half Am Pm Noon Midnight Ex Dividend Dividends Split Stock Common Preferred
Class Series Warrants Notes Debentures Bills Bill Mid Nil Unch Pvs Tonne Bags Barrels
Ecu Ecus Treasuries GNP GDP CPI PPI PSBR CEO CFO IPO LBO OTC VAT AIDS EMS Chapter
""")

# Words too generic to name an entity alone (they may still sit inside a longer name).
GENERIC = _words("""
Federal National International Central Western Eastern Northern Southern North South East
West Middle Upper Lower Greater Great General Special Joint Senior Junior Acting Former
Current Final New Old First Second Third Fourth Fifth Government Industry Market Markets
Stocks Bonds Oil Gold Exports Imports Trade Company Companies Tax Taxes Rate Rates
Interest Growth Deficit Surplus Budget Money Supply Output Production Demand Inflation
Prime Average Index Estimate Estimates Plans Group Holdings Bank Banks Exchange
Association Ministry Reserve Board Council Party Committee Department Union Fund Agency
Commission Office Administration Court
Communist Socialist Democrat Democrats Republican Republicans Liberal Liberals
Conservative Conservatives Labour Labor Christian Catholic Moslem Moslems Muslim Islamic
Jewish Protestant Church God English Europe's Community Airlines Motors Energy Resources
Securities Capital Financial Investment Insurance Savings Corporation Holding Trust
Economic Monetary Fiscal Agricultural Agriculture Commerce Finance Foreign Defence
Defense Justice Health Education Energy Transport Interior Affairs Development Policy
President Chairman Minister Secretary Governor Spokesman Spokeswoman Chief Executive
Officer Director Premier Prime Vice Deputy Ministers Officials Analyst Economist State
States Street Avenue Square Road River Island Islands City County Province Region Area
Zone Port Airport Station Center Centre Hall House Building Plaza Tower Mr Mrs Ms Dr
Firms Firm Officials Sources Stocks Shares Futures Options Bonds Traders Banks
""")

# Reuters table words: a paragraph that starts with one of these and carries digits is a table.
TABLE_WORDS = _words("""
Shr Shrs Net Revs Rev Qtr Qtrs Avg Oper Mths Mth Year Nine Six Three Twelve Sales Loss
Profit Income Div Qtly Pay Record Prior Note Assets Deposits Loans Tonnes Period Ended
Extraordinary Discontinued Oper. Shr. Net. Revs. Cts Dlrs Mln Billion Vs Primary
Fully Diluted Backlog Earnings Operating Pretax Orders Loans Gross Total
""")

# Abbreviations whose final period does not end a sentence.
ABBREVIATIONS = _words("""
Mr Mrs Ms Dr Sr Jr St Gen Sen Rep Gov Lt Col Capt Adm Sgt Prof Rev Inc Corp Co Ltd Cos
Bros Mt Ft No vs Jan Feb Mar Apr Jun Jul Aug Sep Sept Oct Nov Dec Messrs Dept Govt Pty
""")

# Name suffixes dropped from person names so "James A. Baker III" and "James Baker" merge.
NAME_SUFFIXES = _words("Jr Sr II III IV Jr. Sr.")

# Nationality adjectives: never entities alone, dropped from the front of a name.
DEMONYMS = _words("""
American Americans Argentine Argentinian Australian Austrian Belgian Bolivian Brazilian
British Bulgarian Burmese Canadian Chilean Chinese Colombian Cuban Czech Danish Dutch
Ecuadorean Ecuadorian Egyptian English European Europeans Filipino Finnish French German
Germans Greek Hungarian Indian Indonesian Iranian Iraqi Irish Israeli Italian Japanese
Jordanian Kenyan Korean Kuwaiti Lebanese Libyan Malaysian Mexican Moroccan Nigerian
Norwegian Pakistani Peruvian Philippine Polish Portuguese Qatari Romanian Russian Saudi
Scottish Singaporean Soviet Spanish Swedish Swiss Syrian Taiwanese Thai Tunisian Turkish
Ugandan Venezuelan Vietnamese Yugoslav Zambian Zimbabwean Arab Arabs Asian African Western
Eastern Latin Nordic Scandinavian Mideast Allied Communist Socialist Democratic
Republican Liberal Conservative Iranians Iraqis Kuwaitis Saudis Soviets Congressional
""")

# Lower-case words that, right before or after a name, say it is a person's.
PERSON_ROLE_WORDS = _words("""
chairman chairwoman president minister secretary governor spokesman spokeswoman analyst
economist director executive officer manager head leader official trader dealer
strategist treasurer partner founder premier chancellor senator ambassador commissioner
negotiator vice-president vice-chairman counsel lawyer attorney investor financier mayor
""")

# Common first names across cultures: a run that starts with one (and has two to four words)
# is a person unless another rule says otherwise. Names that are also common English words,
# months, places or company names (May, Will, Grant, Chase, Dean, Morgan, Jordan) are left out.
FIRST_NAMES = _words("""
Aaron Adam Alan Albert Alexander Alfred Allen Andrew Andre Angela Ann Anne Anthony Antonio
Arnold Arthur Barbara Barry Ben Benjamin Bernard Bill Bob Brian Bruce Carl Carlos Charles
Christopher Clayton Craig Daniel David Dennis Donald Douglas Edward Edwin Elizabeth Eric
Ernest Eugene Frank Francis Francesco Franz Fred Frederick Gary George Gerald Gerhard
Giulio Gordon Gregory Harold Harry Helmut Henry Herbert Howard Hugh Ian Jack Jacques James
Jane Jean Jeffrey Jerry Jim Joe John Johannes Jose Joseph Juan Karl Keith Kenneth Kevin
Kiichi Larry Lawrence Leon Lee Leonard Louis Luis Manuel Marc Margaret Maria Mario Mark
Martin Mary Michael Michel Mikhail Nancy Nigel Norman Oscar Otto Patrick Paul Peter Philip
Pierre Ralph Raymond Richard Robert Roger Ronald Roy Russell Samuel Satoshi Stephen Steven
Thomas Timothy Walter Warren William Willy Yasuhiro Carlo Gianni Giovanni Hans Heinz
Jaime Corazon Ferdinand Rodolfo Hisham Jesus Miguel Pedro Rafael Ali Mohammed Mohammad
Ahmed Abdul Rilwanu Gustavo Alfonso Dilson Jacob Olivier Edouard Valery Yves Francois
Brian Malcolm Alastair Geoffrey Neil Nicholas Robin Simon Stuart Tony Terence Clifford
Lloyd Beryl Preston Malcolm Sam Steve Dan Tom Ted Ed Chris Jay Joel Joan Judith Susan
Ruth Deborah Carol Linda Lynn Patricia Helen Janet Kathleen Ivan Boris Nikolai Yuri
Viktor Vladimir Leonid Eduard Zhao Deng Li Lee Kim Park Chun Noboru Toshiaki Makoto
Hiroshi Takeshi Yoshio Akio Shintaro Masaru Kenji Ryutaro Hajime Wilfried Wim Ruud Onno
Lamberto Bettino Ciriaco Arnaldo Giovanni Amintore Felipe Carlos Mario Raul Joao Fernando
Abigail Agnes Alice Alison Amanda Amy Andrea Angelica Anita Annette Audrey Beatrice Betty
Brenda Caroline Catherine Cecilia Charlotte Christina Christine Claire Clara Claudia Cynthia
Diana Diane Donna Doris Dorothy Edith Eileen Eleanor Elaine Ellen Emily Emma Erica Esther
Evelyn Fiona Frances Gail Gloria Grace Hannah Harriet Heather Irene Isabel Isabella Jacqueline
Jennifer Jessica Jill Joanna Josephine Joyce Julia Julie Karen Katherine Kathryn Laura Lauren
Lisa Lois Louise Lucy Lydia Marilyn Marion Martha Megan Melissa Michelle Miriam Monica
Natalie Nicole Norma Olivia Pamela Paula Phyllis Rachel Rebecca Rita Roberta Sandra Sara
Sarah Sharon Shirley Sophia Stephanie Sylvia Teresa Theresa Valerie Vanessa Veronica Wendy
Alec Alexis Andy Barney Benny Bernie Bradley Brendan Byron Calvin Cameron Charlie Clarence
Clive Colin Conrad Curtis Cyril Damian Darren Dennis Derek Desmond Dominic Duncan Dwight
Earl Edgar Elliott Emmanuel Ernie Felix Floyd Francisco Gavin Gerard Gilbert Glenn Graham
Gregg Harvey Hector Herman Horace Isaac Jasper Jeremy Jerome Jesse Jonathan Julian Justin
Kurt Lionel Lucas Luke Marcus Matthew Maurice Max Mervyn Mitchell Nathan Nathaniel Neville
Noel Oliver Owen Patrice Percy Phil Quentin Randolph Reginald Rex Rodney Rolf Ross Rupert
Sean Sebastian Seth Sidney Spencer Stanislaw Terry Theodore Tobias Travis Trevor Vernon
Victor Vincent Wallace Wayne Wilbur Wilson Zachary Kai Anders Lars Nils Sven Erik Jonas
Magnus Mats Henrik Hendrik Jan Jens Johan Kjell Leif Olaf Ole Per Rune Stig Tor Torsten
Ulf Gunnar Helga Ingrid Astrid Birgit Britt Elin Freya Greta Hilde Karin Kristin Liv
Maja Sigrid Solveig Ulla Tuomas Mikko Jukka Pekka Matti Juha Kari Antti Aino Elina Tarja
Marloes Maarten Pieter Joost Willem Sander Bram Ruben Femke Lotte Anouk Hanneke Ineke
Dirk Jurgen Klaus Manfred Rainer Stefan Wolfgang Uwe Detlef Dieter Gunter Horst Jochen
Lothar Matthias Sabine Ursula Gisela Heike Petra Monika Renate Brigitte Angelika Gudrun
Alain Bernard Christophe Didier Emmanuel Etienne Fabrice Guillaume Henri Herve Jerome
Laurent Lucien Marcel Mathieu Nicolas Philippe Raymond Sebastien Thierry Xavier Amelie
Brigitte Camille Chantal Elise Helene Isabelle Josette Marianne Martine Monique Nathalie
Sophie Sylvie Veronique Alessandro Andrea Enrico Fabio Franco Gianluca Giorgio Giuseppe
Luca Luigi Marco Massimo Matteo Paolo Pietro Renato Roberto Salvatore Sergio Stefano
Umberto Vittorio Chiara Francesca Giulia Lucia Paola Silvia Sofia Valentina Alberto
Alejandro Alvaro Andres Angel Diego Eduardo Emilio Enrique Esteban Federico Gonzalo
Guillermo Hugo Ignacio Javier Jorge Julio Leonardo Lorenzo Marcelo Mariano Martin Mateo
Pablo Ramon Ricardo Rodrigo Santiago Sergio Tomas Vicente Adriana Alicia Ana Beatriz
Carmen Carolina Cristina Elena Gabriela Isabel Juana Laura Lucia Luisa Marta Mercedes
Natalia Patricia Pilar Raquel Rosa Silvia Teresa Ximena Aleksandr Aleksei Alexei Andrei
Anatoly Dmitri Dmitry Gennady Grigory Igor Konstantin Maxim Mikhail Oleg Pavel Pyotr
Sergei Sergey Stanislav Vasily Vitaly Yevgeny Anastasia Galina Irina Ludmila Marina Nadia
Natasha Olga Svetlana Tatiana Valentina Yelena Zbigniew Jerzy Krzysztof Lech Tadeusz
Wojciech Agnieszka Ewa Katarzyna Malgorzata Milan Miroslav Vaclav Zoltan Laszlo Istvan
Janos Ferenc Gyula Attila Zsuzsa Nicolae Ion Andreas Dimitris Georgios Konstantinos
Nikos Yannis Eleni Maria Mehmet Mustafa Ahmet Ali Hasan Huseyin Ibrahim Ismail Kemal Murat
Osman Turgut Aylin Ayse Elif Emine Fatma Zeynep Abdullah Abdulaziz Abdel Ahmad Amin Amir
Amira Ayman Bashir Fahd Faisal Farid Fatima Hamid Hassan Hussein Idris Imran Jamal Karim
Khalid Laila Leila Mahmoud Mansour Mohamed Muhammad Mustafa Nabil Nadia Omar Rashid Saad
Salah Salim Salman Sami Samir Tariq Walid Yasser Yousef Youssef Yusuf Zaid Zainab Avraham
Benjamin Chaim Moshe Shimon Shlomo Yitzhak Yosef Yael Aarav Amit Anand Anil Arjun Arun
Ashok Deepak Gopal Ajay Krishna Manmohan Mohan Narendra Pranab Rahul Raj Rajesh Rajiv
Ramesh Ravi Sanjay Sunil Suresh Vijay Vikram Anjali Deepa Indira Kavita Lakshmi Meera
Neha Pooja Priya Radha Sonia Sunita Chen Wang Zhang Liu Yang Huang Wei Ming Jian Jun Hua
Xiaoping Zemin Jintao Peng Lin Takashi Kenichi Kazuo Yoshihiko Ichiro Taro Shinzo Junichiro
Keizo Tomiichi Haruko Yoko Yuki Akira Masayoshi Nobuo Sadao Tadashi Tetsuo Jae Young Dae
Sung Hyun Min Seung Nguyen Thanh Suharto Budi Siti Wahid Mahathir Anwar Lim Corazon Fidel
Imelda Raul Lula Dilma Kofi Kwame Nelson Thabo Jacob Cyril Desmond Olusegun Oluwaseun
Chinua Ngozi Chidi Emeka Amara Ama Kwaku Yaw Abebe Tesfaye Wanjiru Jomo Uhuru Daniel
""")


def _geo_index() -> dict[str, str]:
    from graph.keys import entity_key

    index = {entity_key(name): name for name in _GEO_NAMES}
    index.update(GEO_ALIASES)
    return index


# entity key of a gazetteer name or alias -> canonical display name
GEO_INDEX: dict[str, str] = _geo_index()

# Words that can never be an entity on their own.
SOLO_STOP = (
    FUNCTION_WORDS
    | CALENDAR
    | BOILERPLATE
    | GENERIC
    | TITLES
    | PORTFOLIO
    | DEMONYMS
    | CORPORATE_SUFFIXES
    | EVENT_HEADS
    | TABLE_WORDS
    | NAME_PARTICLES
    | STARTER_WORDS
    | ORG_HEADS
) - _words("""
Treasury Congress Senate Parliament Cabinet Fed Pentagon Kremlin Bundesbank Commerzbank
Diet Navy Army Bundestag
""")

# Words stripped from either end of a run ("March", "Reuter", "Mln").
EDGE_STOP = CALENDAR | BOILERPLATE
